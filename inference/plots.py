"""Side-by-side pictures of posteriors from several methods (matplotlib only)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xarray as xr

from sparsebayes.models import RVMRegression

from .compare import compare_posteriors
from .results import basis_from_posterior, flat_draws

__all__ = ["plot_posteriors"]


def _labels(post: xr.DataTree) -> list[str]:
    return [str(x) for x in post["posterior"]["basis"].values]


def plot_posteriors(posteriors: Mapping[str, xr.DataTree], X=None, *, ci_prob: float = 0.9,
                    max_weights: int = 20, X_train=None, t_train=None, figsize=None,
                    colors: Mapping[str, str] | None = None):
    """Compare posteriors from several methods in one figure.

    Panels: (1) median and central ``ci_prob`` interval of each weight ``w_i`` per method,
    for the ``max_weights`` bases with the largest median ``|w_i|`` in any method (the
    results aligned by :func:`~sparsebayes.inference.compare.compare_posteriors`: a pruned
    weight shows as 0, and results on different basis functions are refused);
    (2) the same for ``log10 alpha_i`` (point-estimate methods show a point, pruned
    columns none);
    (3) with a 1-D ``X`` (regression only): each method's predictive mean and central band
    of ``t`` (``Phi w`` plus noise, over the posterior draws), with the training data.

    ``colors``: {method name: matplotlib colour} (default: the colour cycle in order).
    Returns the matplotlib ``Figure``.
    """
    import matplotlib.pyplot as plt

    if not isinstance(posteriors, Mapping) or not posteriors:
        raise TypeError("posteriors must be a non-empty dict {method name: DataTree}")
    for name, post in posteriors.items():
        if not isinstance(post, xr.DataTree) or "posterior" not in post.children:
            raise TypeError(f"posteriors[{name!r}] is not a DataTree returned by fit()")
    if not 0 < ci_prob < 1:
        raise ValueError(f"ci_prob must lie in (0, 1), got {ci_prob!r}")
    lo_q, hi_q = 50 * (1 - ci_prob), 50 * (1 + ci_prob)
    regression = all(p.attrs.get("problem_kind") == RVMRegression.kind
                     for p in posteriors.values())
    show_pred = X is not None and regression
    if X is not None:
        X = np.asarray(X, dtype=float)
        X = X[:, None] if X.ndim == 1 else X
        if X.shape[1] != 1:
            raise ValueError(f"X must be 1-D for the predictive panel, got {X.shape[1]} columns")
    n_panels = 3 if show_pred else 2
    fig, axes = plt.subplots(1, n_panels, figsize=figsize or (5 * n_panels, 4.5))

    aligned = compare_posteriors(posteriors)
    # the bases to show: largest median |w| in any method
    size: dict[str, float] = {}
    for post in aligned.values():
        med = np.median(np.abs(flat_draws(post, "w")), axis=0)
        med = med.max(axis=1) if med.ndim == 2 else med
        for lab, m in zip(_labels(post), med):
            size[lab] = max(size.get(lab, 0.0), float(m))
    shown = sorted(size, key=size.get, reverse=True)[:max_weights]
    shown = sorted(shown, key=lambda s: (s != "bias", int(s) if s.isdigit() else 0, s))
    pos = {lab: i for i, lab in enumerate(shown)}
    n_methods = len(posteriors)
    offsets = np.linspace(-0.3, 0.3, n_methods) if n_methods > 1 else np.zeros(1)

    for k, (name, post) in enumerate(posteriors.items()):
        labels = _labels(aligned[name])
        color = (colors or {}).get(name, f"C{k}")
        for ax, var, transform in ((axes[0], "w", None), (axes[1], "alpha", np.log10)):
            d = flat_draws(aligned[name], var)
            if d.ndim == 3:  # softmax: first class only
                d = d[..., 0]
            if transform is not None:
                with np.errstate(divide="ignore"):
                    d = transform(d)
            idx = [i for i, lab in enumerate(labels) if lab in pos and np.isfinite(d[:, i]).all()]
            if not idx:
                continue
            y = np.array([pos[labels[i]] for i in idx]) + offsets[k]
            q = np.percentile(d[:, idx], [lo_q, 50, hi_q], axis=0)
            ax.errorbar(q[1], y, xerr=[q[1] - q[0], q[2] - q[1]], fmt="o", ms=3, color=color,
                        label=name, capsize=0)
        if show_pred:
            basis, columns = basis_from_posterior(post)
            order = np.argsort(X[:, 0])
            Xs = X[order]
            Phi = basis.design(Xs, columns=columns)
            w = flat_draws(post, "w")
            rng = np.random.default_rng(0)
            take = rng.choice(w.shape[0], size=min(1000, w.shape[0]), replace=False)
            f = w[take] @ Phi.T
            noise = flat_draws(post, "noise_sd")[take] if "noise_sd" in post["posterior"] else 0
            tdraw = f + np.asarray(noise)[:, None] * rng.standard_normal(f.shape)
            lo, hi = np.percentile(tdraw, [lo_q, hi_q], axis=0)
            axes[2].fill_between(Xs[:, 0], lo, hi, color=color, alpha=0.2)
            axes[2].plot(Xs[:, 0], f.mean(axis=0), color=color, label=name)
    for ax, title in ((axes[0], "weights w"), (axes[1], "log10 alpha")):
        ax.set_yticks(range(len(shown)), shown)
        ax.set_ylabel("basis")
        ax.set_title(f"{title}: median and {ci_prob:.0%} interval")
        ax.grid(axis="x", alpha=0.3)
    axes[0].axvline(0, color="k", lw=0.5)
    axes[0].legend(fontsize="small")
    if show_pred:
        if X_train is not None and t_train is not None:
            axes[2].plot(np.ravel(X_train), np.ravel(t_train), "k.", ms=3, label="data")
        axes[2].set_title(f"predictive mean and {ci_prob:.0%} band of t")
        axes[2].set_xlabel("x")
        axes[2].legend(fontsize="small")
    fig.tight_layout()
    return fig
