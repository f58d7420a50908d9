"""Report of a comparison study, as Markdown (``report.md`` with PNG figures beside it) and
as one self-contained HTML page (``report.html``, the same content with the figures and the
table embedded as data: URIs): summary tables (mean ± sd over splits), paired t-tests as in
RQ05 Table 1, and figures (each method's losses with 95% intervals per data set,
predictive bands for 1-D regression, decision boundaries with relevance vectors circled for
2-D classification, posterior comparison, sparsity vs error)."""

from __future__ import annotations

import base64
import datetime
import html
import json
import os
import re
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from sparsebayes.inference.families import FAMILIES as MODEL_FAMILIES
from sparsebayes.inference.methods import METHODS
from sparsebayes.models.datasets import CLASSIFICATION, COUNTS, REGRESSION, DataInfo

from . import cells as study_cells
from .cells import GP_EXACT_MAX_N, GP_INDUCING, Cell, dictionary_size
from .data import DataSpec
from .specs import FAMILIES, MethodSpec, parse_spec, spec_from_label
from .storage import MANIFEST, TABLE, load_posterior, load_table

__all__ = ["write_report", "write_html", "paired_tests", "summary_table", "loo_table",
           "loo_agreement", "LOSSES"]

# per task: (column, heading, scale for display) of the losses compared by paired t-tests
LOSSES = {
    REGRESSION: [("mse", "squared error", 1.0), ("mae", "absolute error", 1.0),
                 ("nlpd", "neg. log predictive density", 1.0)],
    CLASSIFICATION: [("error_rate", "error rate (%)", 100.0), ("log_loss", "log loss", 1.0),
                     ("brier", "Brier score", 1.0)],
}
LOSSES[COUNTS] = LOSSES[REGRESSION]  # counts: numeric targets, scored like regression
_SUMMARY = {
    REGRESSION: [("rmse", "RMSE", 1.0), ("mae", "MAE", 1.0), ("nlpd", "NLPD", 1.0),
                 ("coverage95", "95% coverage", 1.0)],
    CLASSIFICATION: [("error_rate", "error %", 100.0), ("log_loss", "log loss", 1.0),
                     ("brier", "Brier", 1.0)],
}
_SUMMARY[COUNTS] = _SUMMARY[REGRESSION]
_COMMON = [("n_relevant", "relevance vectors", 1.0), ("fit_seconds", "fit s", 1.0),
           ("compile_seconds", "compile s (total)", 1.0), ("divergences", "divergences", 1.0),
           ("max_rhat", "max R-hat", 1.0)]
# what every column and term of the report means, said at the top of the report
TERMS = {
    "splits ok": "the splits on which the method finished, of those it ran",
    "RMSE / MAE": "root mean squared / mean absolute error of the predictive mean on the "
                  "test split",
    "NLPD": "mean negative log predictive density of the test targets (lower is better)",
    "95% coverage": "the fraction of test targets inside the central 95% predictive "
                    "interval (0.95 when the predictive is calibrated)",
    "error %": "the share of misclassified test points, the most probable class predicted",
    "log loss": "mean negative log probability of the test labels",
    "Brier": "mean squared difference between the predicted class probabilities and the "
             "one-hot test labels",
    "relevance vectors": "the kernel functions a fit keeps (Tipping's count, the bias "
                         "apart); for methods that keep every weight (NUTS, ADVI, VRVM) the "
                         "effective number sum_i gamma_i, gamma_i = 1 - alpha_i Sigma_ii "
                         "(T01 eq. 17); '–' for a GP, which keeps every training point",
    "fit s": "seconds of the fit alone (width search included, compilation excluded)",
    "compile s (total)": "seconds of compilation over the method's cells: a sampler's own "
                         "(the first NUTS cell of a model and data shape in a worker) and "
                         "each worker process's first use of the method (a fit, prediction "
                         "and leave-one-out on a few training rows, timed apart, which pays "
                         "numba's and PyTensor's compilations)",
    "divergences": "NUTS transitions that diverged, summed over the splits (a biased sampler "
                   "when > 0)",
    "max R-hat": "the largest rank-normalised split R-hat over the sampled variables and "
                 "splits (Vehtari et al. 2021; above 1.01 the chains have not mixed)",
}
_DIGITS = {"n_relevant": 1, "fit_seconds": 3, "error_rate": 2}
ALPHA = 0.05  # family-wise level of the Holm-corrected paired tests in the conclusions
# losses a method without a predictive distribution cannot have (shown "n/a")
PROBABILISTIC = ("nlpd", "coverage95", "log_loss", "brier")


def _fmt(x: float, digits: int = 3) -> str:
    if x is None or not np.isfinite(x):
        return "–"
    if x != 0 and (abs(x) >= 1e4 or abs(x) < 10 ** -digits):
        return f"{x:.{digits}g}"
    return f"{x:.{digits}f}"


def _distinct(values, digits: int = 3, most: int = 8) -> list[str]:
    """``values`` by :func:`_fmt` with the fewest digits (from ``digits`` up to ``most``)
    that print distinct values distinct: means of 0.01075 and 0.01102 read 0.0108 and
    0.0110, not 0.011 twice. Equal values stay equal."""
    x = [float(v) if v is not None else np.nan for v in values]

    def differ(a: float, b: float) -> bool:  # beyond floating-point rounding
        return bool(np.isfinite(a) and np.isfinite(b)
                    and abs(a - b) > 1e-9 * max(abs(a), abs(b)))

    for k in range(digits, most + 1):
        text = [_fmt(v, k) for v in x]
        clash = any(text[i] == text[j] and differ(x[i], x[j])
                    for i in range(len(x)) for j in range(i))
        if not clash:
            break
    return text


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\[])")


def whole_sentences(text, limit: int = 300) -> str:
    """``text`` shortened to its first whole sentences within ``limit`` characters (the
    first one always whole, however long): nothing is cut mid-sentence. A shortened text
    ends with where the rest is (``results.csv`` holds every cell's full text). Warnings
    joined by ``" | "`` are shortened one by one; line breaks become spaces (a Markdown
    table's cell is one line)."""
    text = "" if text is None or (isinstance(text, float) and np.isnan(text)) else str(text)
    text = " ".join(text.replace(" | ", "\x00").split()).replace("\x00", " | ")
    parts = [p for p in text.split(" | ") if p]
    if len(parts) > 1:
        return " | ".join(whole_sentences(p, limit) for p in parts)
    sentences = _SENTENCE_END.split(text.strip())
    kept = sentences[:1]
    for sentence in sentences[1:]:
        if len(" ".join([*kept, sentence])) > limit:
            break
        kept.append(sentence)
    short = " ".join(kept)
    return short if len(kept) == len(sentences) else short + " [more in results.csv]"


def _markdown(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines)


def summary_table(table: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """Mean ± sd over the successful splits, one row per method, for one data set."""
    sub = table[table["dataset"] == dataset]
    task = sub["task"].iloc[0]
    rows = []
    for method, grp in sub.groupby("method", sort=False):
        ok = grp[grp["status"] == "ok"]
        row = {"method": f"`{method}`", "splits ok": f"{len(ok)}/{len(grp)}"}
        point_only = "probabilistic" in ok and len(ok) and ok["probabilistic"].eq(0).all()
        for col, name, scale in _SUMMARY[task] + _COMMON:
            if point_only and col in PROBABILISTIC:
                row[name] = "n/a"
                continue
            if col not in ok or ok[col].isna().all():
                continue
            v = ok[col].to_numpy(float) * scale
            if col == "divergences":
                row[name] = f"{int(np.nansum(v))}"
            elif col == "max_rhat":
                row[name] = _fmt(np.nanmax(v), 2)
            elif col == "compile_seconds":
                row[name] = _fmt(np.nansum(v), 2)
            else:
                sd = np.nanstd(v, ddof=1) if np.isfinite(v).sum() > 1 else np.nan
                k = _DIGITS.get(col, 3)
                row[name] = _fmt(np.nanmean(v), k) + ("" if not np.isfinite(sd)
                                                      else f" ± {_fmt(sd, k)}")
        rows.append(row)
    return pd.DataFrame(rows).fillna("–")


def paired_tests(table: pd.DataFrame, dataset: str, loss: str) -> pd.DataFrame:
    """Two-sided paired t-test p-values (``scipy.stats.ttest_rel``) across the splits both
    methods finished, as in RQ05 Table 1: the first row holds each method's mean loss;
    row ``i``, column ``j > i`` the p-value for methods i and j."""
    sub = table[(table["dataset"] == dataset) & (table["status"] == "ok")]
    sub = sub[sub[loss].notna()] if loss in sub else sub.iloc[0:0]
    methods = list(dict.fromkeys(sub["method"]))
    wide = sub.pivot_table(index="split", columns="method", values=loss, aggfunc="first")
    out = pd.DataFrame("", index=["mean loss", *methods], columns=methods, dtype=object)
    out.loc["mean loss", methods] = _distinct([float(wide[m].mean()) for m in methods])
    for j, mj in enumerate(methods):
        out.loc[mj, mj] = "•"
        for mi in methods[:j]:
            pair = wide[[mi, mj]].dropna()
            if len(pair) < 2:
                out.loc[mi, mj] = "n<2"
                continue
            diff = pair[mj].to_numpy() - pair[mi].to_numpy()
            if np.allclose(diff, 0):
                out.loc[mi, mj] = "equal"
                continue
            p = stats.ttest_rel(pair[mj], pair[mi]).pvalue
            out.loc[mi, mj] = "<0.01" if p < 0.01 else f"{p:.2f}"
    out.index.name = ""
    return out


def _wide(sub: pd.DataFrame, col: str) -> pd.DataFrame:
    """Splits x methods of one loss, the methods in the table's order."""
    methods = list(dict.fromkeys(sub["method"]))
    wide = sub.pivot_table(index="split", columns="method", values=col, aggfunc="first")
    return wide[[m for m in methods if m in wide and wide[m].notna().any()]]


def best_methods(table: pd.DataFrame, dataset: str, loss: str) -> dict | None:
    """The method with the lowest mean ``loss`` on ``dataset`` and each other method's
    paired t-test against it over their common splits (:func:`metrics.paired_t_test`, as in
    RQ05 Table 1), the p-values Holm-corrected over those comparisons (Holm 1979).
    Returns ``{"best", "means", "p"}`` (``p``: {method: adjusted p or NaN with < 2 common
    splits}), or None with fewer than two methods."""
    from sparsebayes.inference.metrics import holm, paired_t_test

    sub = table[(table["dataset"] == dataset) & (table["status"] == "ok")]
    if loss not in sub:
        return None
    wide = _wide(sub, loss)
    if wide.shape[1] < 2:
        return None
    means = wide.mean()
    best = str(means.idxmin())
    raw = {}
    for m in wide.columns:
        pair = wide[[best, m]].dropna()
        if m != best:
            raw[m] = paired_t_test(pair[m], pair[best])[1] if len(pair) >= 2 else np.nan
    tested = [m for m, v in raw.items() if np.isfinite(v)]
    adjusted = dict(zip(tested, holm([raw[m] for m in tested]) if tested else []))
    return {"best": best, "means": means,
            "p": {m: adjusted.get(m, np.nan) for m in raw}}


# per task: the loss whose negative is the held-out mean log density beside the LOO elpd
HELD_OUT = {REGRESSION: "nlpd", CLASSIFICATION: "log_loss", COUNTS: "nlpd"}
LOO_TERMS = (
    "LOO elpd per point: the leave-one-out expected log predictive density of a method on "
    "its training split, (1/N) sum_n log p(t_n | t_-n) over the N training points (Vehtari, "
    "Gelman & Gabry 2017 eq. 4, divided by N); held-out: the mean log predictive density "
    "of the test targets, mean log p(y | x, training split) (-NLPD for regression, -log loss "
    "for classification). Both are per point and higher is better, so the two rank methods "
    "alike when the LOO estimates what the test split measures.")
# what each LOO estimator is (the table's `estimator` column)
ESTIMATORS = {
    "subsample": "the method refitted from scratch without each point of a subsample drawn "
                 "by a fixed seed (the same points for every method), correcting a cheap "
                 "approximation on every point by the difference estimator (Magnusson et al. "
                 "2020)",
    "reloo": "Pareto-smoothed importance sampling over the sampled posterior's draws, the "
             "points whose Pareto k exceeds ArviZ's threshold refitted exactly",
    "psis": "Pareto-smoothed importance sampling over the sampled posterior's draws (a "
            "point whose Pareto k exceeds ArviZ's threshold has an unreliable estimate, "
            "Vehtari et al. 2024; the table gives their share)",
    "refit": "exact: the method refitted without each point (warm-started from its fit)",
    "kfold": "10-fold: the method refitted without each tenth of the points (for large N; "
             "0.9 N points per fit, so a little pessimistic)",
    "gaussian": "at the hyperparameters fitted to all points, nothing refitted: optimistic",
    "cavity": "at the hyperparameters fitted to all points, nothing refitted: optimistic",
}
OPTIMISTIC = ("gaussian", "cavity")


def _bad_k(grp: pd.DataFrame) -> tuple[int, int]:
    """Training points, summed over a method's PSIS cells, whose Pareto k exceeds ArviZ's
    threshold (``loo_bad_k``; points that ``reloo`` refitted count 0), and the points of
    those cells: ``(0, 0)`` without PSIS cells."""
    if "loo_bad_k" not in grp:
        return 0, 0
    psis = grp[grp["loo_bad_k"].notna()]
    return int(psis["loo_bad_k"].sum()), int(psis["n_train"].sum())


def _points(bad: int, n: int) -> str:
    """``"12 of 60 training points"``: counts, which never round to "0%"."""
    return f"{bad} of {n} training point{'s' if n != 1 else ''}"


def _loo_means(sub: pd.DataFrame, task: str) -> pd.DataFrame:
    """Per method (table order), over the splits with both numbers: the mean LOO elpd per
    training point (``loo``) and the mean held-out log density (``held``: minus
    :data:`HELD_OUT`'s loss)."""
    col = HELD_OUT[task]
    if "loo_elpd_per_point" not in sub or col not in sub:
        return pd.DataFrame(columns=["loo", "held"])
    both = sub.assign(loo=sub["loo_elpd_per_point"].astype(float), held=-sub[col].astype(float))
    both = both[np.isfinite(both["loo"]) & np.isfinite(both["held"])]
    return both.groupby("method", sort=False)[["loo", "held"]].mean()


def loo_table(table: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """One row per method of ``dataset``: LOO elpd per training point and held-out mean
    log density (mean ± sd over the successful splits), the LOO estimator(s) and mean time,
    and why a method has no LOO. Empty when the table has no LOO columns (a study stored
    before them)."""
    sub = table[(table["dataset"] == dataset) & (table["status"] == "ok")]
    if "loo_elpd_per_point" not in sub or not len(sub):
        return pd.DataFrame()
    col = HELD_OUT[sub["task"].iloc[0]]

    def mean_sd(v: np.ndarray) -> str:
        v = v[np.isfinite(v)]
        if not v.size:
            return "–"
        return _fmt(v.mean()) + (f" ± {_fmt(v.std(ddof=1))}" if v.size > 1 else "")

    rows = []
    for method, grp in sub.groupby("method", sort=False):
        loo = grp["loo_elpd_per_point"].to_numpy(float)
        held = -grp[col].to_numpy(float) if col in grp else np.full(len(grp), np.nan)
        est = sorted({str(e) for e in grp.get("loo_estimator", pd.Series()).dropna() if e})
        bad, n = _bad_k(grp)
        if bad > 0:
            est = [f"{e} (Pareto k high at {_points(bad, n)})" if e == "psis" else e
                   for e in est]
        why = sorted({str(w) for w in grp.get("loo_missing", pd.Series()).dropna() if w})
        rows.append({"method": f"`{method}`", "LOO elpd per point": mean_sd(loo),
                     "held-out mean log density": mean_sd(held),
                     "estimator": ", ".join(est) or "–",
                     "LOO s": _fmt(np.nanmean(grp["loo_seconds"].to_numpy(float)), 3)
                     if "loo_seconds" in grp and grp["loo_seconds"].notna().any() else "–",
                     "no LOO because": "; ".join(whole_sentences(w, 200) for w in why)})
    out = pd.DataFrame(rows)
    return out if out["no LOO because"].astype(bool).any() else out.drop(
        columns="no LOO because")


def loo_ranking(table: pd.DataFrame, dataset: str, task: str) -> dict | None:
    """The two rankings of :func:`loo_agreement` as numbers: ``{"n", "tau", "best_loo",
    "best_held"}`` over the ``n >= 2`` methods of ``dataset`` with both a LOO elpd and a
    held-out log density (Kendall's tau-b of their means; NaN when tied), else None."""
    sub = table[(table["dataset"] == dataset) & (table["status"] == "ok")]
    means = _loo_means(sub, task)
    if len(means) < 2:
        return None
    return {"n": len(means), "tau": stats.kendalltau(means["loo"], means["held"]).statistic,
            "best_loo": means["loo"].idxmax(), "best_held": means["held"].idxmax()}


def loo_agreement(table: pd.DataFrame, dataset: str, task: str) -> str | None:
    """Whether leave-one-out and the test split rank the methods of ``dataset`` alike: the
    methods with both a LOO elpd and a held-out log density are ranked by their means over
    the same splits (:func:`_loo_means`), the two rankings compared by Kendall's tau-b
    (``scipy.stats.kendalltau``) and by which method is first. None when the table has no
    LOO column or no method has both numbers."""
    sub = table[(table["dataset"] == dataset) & (table["status"] == "ok")]
    if "loo_elpd_per_point" not in sub:
        return None
    means = _loo_means(sub, task)
    rank = loo_ranking(table, dataset, task)
    has = sub.groupby("method", sort=False)["loo_elpd_per_point"].apply(
        lambda v: np.isfinite(v.to_numpy(float)).any())
    none = list(has.index[~has.to_numpy(bool)])
    if not len(means):
        return None
    text = "**LOO vs held-out**: "
    if len(means) < 2:
        text += (f"only `{means.index[0]}` has both a LOO elpd and a held-out log density: "
                 "no ranking to compare")
    else:
        def order(col: str) -> str:
            return " > ".join(f"`{m}`" for m in means[col].sort_values(
                ascending=False, kind="stable").index)

        tau = rank["tau"]
        verdict = ("cannot be compared (tied means)" if not np.isfinite(tau) else
                   "agree" if tau >= 1 - 1e-12 else "partly agree" if tau > 0 else "disagree")
        text += (f"ranked by mean LOO elpd per training point and by mean held-out log "
                 f"density, the {len(means)} methods with both {verdict}")
        if np.isfinite(tau):
            text += (f" (Kendall's tau = {tau:.2f}), tau being the rank correlation of the "
                     "two orders (1 the same order, -1 the reverse)")
        best_loo, best_held = rank["best_loo"], rank["best_held"]
        if verdict == "agree":
            text += f": both order {order('loo')}"
        else:
            text += f": LOO orders {order('loo')}; held-out {order('held')}"
        text += (f"; both rank `{best_loo}` first" if best_loo == best_held else
                 f"; the best differs: `{best_loo}` by LOO "
                 f"({_fmt(means.loc[best_loo, 'loo'])}), `{best_held}` held-out "
                 f"({_fmt(means.loc[best_held, 'held'])})")
    if "loo_estimator" in sub:
        opt = list(dict.fromkeys(sub.loc[sub["loo_estimator"].isin(OPTIMISTIC), "method"]))
        if opt:
            text += ("; at the full-data hyperparameters (optimistic): "
                     + ", ".join(f"`{m}`" for m in opt))
    bad = {m: _bad_k(grp) for m, grp in sub.groupby("method", sort=False)}
    bad = {m: v for m, v in bad.items() if v[0] > 0}
    if bad:
        text += ("; PSIS unreliable where Pareto k is high (Vehtari et al. 2024): " + ", ".join(
            f"`{m}` ({_points(*v)})" for m, v in bad.items()))
    if none:
        text += "; no LOO: " + ", ".join(f"`{m}`" for m in none)
    return text + "."


def reference_basis(sub: pd.DataFrame, ref: str, methods) -> str:
    """What the NUTS reference ``ref`` is the full posterior of, against the ``methods`` it
    is compared with: the same candidate kernel centres (``n_centres``, the median over the
    splits), or which differ, since a ratio between fits on different bases compares models
    as well as inference."""
    if "n_centres" not in sub or sub["n_centres"].isna().all():
        return ("the full posterior of the RVM on its own basis (the methods' bases may "
                "differ: see their centres options)")
    centres = sub.groupby("method", sort=False)["n_centres"].median()
    ref_c = centres.get(ref, np.nan)
    other = {m: centres.get(m, np.nan) for m in methods if m != ref}
    if all(c == ref_c for c in other.values()):
        return f"the full posterior on the same {ref_c:.0f} candidate centres"
    return (f"the full posterior of the RVM on {ref_c:.0f} candidate centres (a k-means "
            "dictionary), while " + ", ".join(f"`{m}` {c:.0f}" for m, c in other.items()
                                             if np.isfinite(c))
            + " (every training point, or its own dictionary): not the same basis, so a "
            "ratio away from 1 measures the basis as well as the approximation")


def conclusions(table: pd.DataFrame, dataset: str, task: str) -> list[str]:
    """"What this study shows" for one data set, from the numbers: per loss the best method
    and which others are or are not distinguishable from it (Holm-corrected paired tests at
    family-wise level ``ALPHA``); for regression how far each posterior's predictive sd and
    90% coverage are from the NUTS posterior's (the full posterior of the same model, when
    the study ran it); whether leave-one-out on the training split ranks the methods as the
    test split does (:func:`loo_agreement`); sparsity against error."""
    sub = table[(table["dataset"] == dataset) & (table["status"] == "ok")]
    out = []
    for col, name, scale in LOSSES[task]:
        res = best_methods(table, dataset, col)
        if res is None:
            continue
        best, means, p = res["best"], res["means"], res["p"]
        same = [m for m, q in p.items() if np.isfinite(q) and q >= ALPHA]
        worse = [m for m, q in p.items() if np.isfinite(q) and q < ALPHA]
        few = [m for m, q in p.items() if not np.isfinite(q)]
        shown = dict(zip(means.index, _distinct(means.to_numpy() * scale)))
        text = f"**{name}**: `{best}` is lowest ({shown[best]})"
        if same:
            text += ("; not distinguishable from it (paired t-test p-value over the common "
                     "splits, Holm-adjusted for the comparisons with the lowest, >= 0.05): "
                     + ", ".join(f"`{m}` ({shown[m]}, p = {p[m]:.2f})" for m in same))
        if worse:
            text += "; worse (Holm-adjusted p < 0.05): " + ", ".join(
                f"`{m}` ({shown[m]})" for m in worse)
        if few:
            text += "; fewer than 2 common splits: " + ", ".join(f"`{m}`" for m in few)
        out.append(text + ".")
    nuts = [m for m in dict.fromkeys(sub["method"]) if _samples_hyperparameters(m)]
    if task != CLASSIFICATION and "pred_sd" in sub and nuts and sub["pred_sd"].notna().any():
        ref = nuts[0]
        sd = _wide(sub, "pred_sd").mean()
        cov = _wide(sub, "coverage90").mean() if "coverage90" in sub else pd.Series()
        if ref in sd:
            khat = (sub.groupby("method", sort=False)["psis_khat"].median()
                    if "psis_khat" in sub else pd.Series(dtype=float))
            parts = []
            for m in sd.index:
                if m == ref:
                    continue
                ratio = sd[m] / sd[ref]
                flag = " (differs by more than 10%)" if abs(ratio - 1) > 0.1 else ""
                k = khat.get(m, np.nan)
                kt = f", Pareto k-hat {k:.2f}" if np.isfinite(k) else ""
                parts.append(f"`{m}` {ratio:.2f}{flag}{kt}")
            text = (f"**Posteriors**: mean predictive sd (over the test points and "
                    f"splits) relative to `{ref}`'s, {reference_basis(sub, ref, sd.index)}: "
                    + ", ".join(parts))
            if khat.notna().any():
                text += (" (Pareto k-hat: PSIS of p(theta, t) / q(theta) over draws of the "
                         "approximation q, Yao et al. 2018; above 0.7 q is far from the "
                         "posterior)")
            if len(cov):
                off = [f"`{m}` {cov[m]:.2f}" for m in cov.index if abs(cov[m] - 0.9) > 0.05]
                text += ("; 90% intervals cover " + ", ".join(
                    f"`{m}` {cov[m]:.2f}" for m in cov.index) + " of the test targets")
                text += (" (more than 0.05 from 0.90: " + ", ".join(off) + ")") if off else \
                    " (all within 0.05 of 0.90)"
            out.append(text + ".")
    agreement = loo_agreement(table, dataset, task)
    if agreement is not None:
        out.append(agreement)
    loss = "rmse" if task != CLASSIFICATION else "error_rate"
    scale = 100.0 if task == CLASSIFICATION else 1.0
    if "n_relevant" in sub and sub["n_relevant"].notna().any() and loss in sub:
        vec = sub.groupby("method", sort=False)["n_relevant"].mean().dropna()
        err = sub.groupby("method", sort=False)[loss].mean().dropna()
        both = [m for m in vec.index if m in err.index]
        if len(both) >= 2:
            sparse = min(both, key=lambda m: vec[m])
            best = min(err.index, key=lambda m: err[m])
            what = "RMSE" if task != CLASSIFICATION else "test error %"
            out.append(
                f"**Sparsity**: `{sparse}` keeps the fewest vectors ({vec[sparse]:.1f}) at "
                f"{what} {_fmt(err[sparse] * scale)}; the lowest {what} is `{best}`'s "
                f"({_fmt(err[best] * scale)}" + (f", {vec[best]:.1f} vectors)." if best in vec
                                                 else ")."))
    return out


# the held-out score of the conclusion: the loss of HELD_OUT by name
_HELD_NAME = {"nlpd": "NLPD", "log_loss": "log loss"}


def study_conclusion(table: pd.DataFrame, datasets) -> list[str]:
    """The report's "Conclusion", from the numbers: per data set the method with the best
    held-out score (the lowest mean NLPD or log loss over the splits, :data:`HELD_OUT`: the
    held-out log density) and the paired t-tests' verdict against it (Holm-adjusted, as in
    :func:`best_methods`), and whether leave-one-out ranks the methods as held-out does
    (:func:`loo_ranking`); across data sets each method's mean rank by the held-out score,
    the data sets it is best on, and on how many LOO and held-out pick the same best.
    Methods without a predictive density (``probabilistic = 0``) have no held-out score and
    are named as not ranked."""
    ok = table[table["status"] == "ok"] if len(table) else table
    out, ranks, loo = [], {}, {}
    for d in datasets:
        sub = ok[ok["dataset"] == d]
        if not len(sub):
            continue
        task = sub["task"].iloc[0]
        col = HELD_OUT[task]
        name = _HELD_NAME[col]
        has = (sub.groupby("method", sort=False)[col].apply(lambda v: v.notna().any())
               if col in sub else pd.Series(False, index=list(dict.fromkeys(sub["method"]))))
        unranked = [m for m, h in has.items() if not h]
        res = best_methods(table, d, col)
        if res is None:
            scored = [m for m, h in has.items() if h]
            out.append(f"`{d}`: " + (f"only `{scored[0]}` has a held-out {name}: nothing to "
                                     "rank" if scored else
                                     f"no method has a held-out {name}") + ".")
            continue
        best, means, p = res["best"], res["means"], res["p"]
        shown = dict(zip(means.index, _distinct(means.to_numpy())))
        same = [m for m, q in p.items() if np.isfinite(q) and q >= ALPHA]
        worse = [m for m, q in p.items() if np.isfinite(q) and q < ALPHA]
        few = [m for m, q in p.items() if not np.isfinite(q)]
        text = f"`{d}` ({task}): `{best}` has the best held-out {name} ({shown[best]})"
        if same:
            text += (", but the paired t-tests (Holm-adjusted p) cannot tell it from "
                     + ", ".join(
                f"`{m}` ({shown[m]}, p = {p[m]:.2f})" for m in same))
            if worse:
                text += "; worse (p < 0.05): " + ", ".join(f"`{m}`" for m in worse)
        elif worse:
            text += (", and the paired t-tests find " + ("every other method" if not few
                     else ", ".join(f"`{m}`" for m in worse)) + " worse (p < 0.05)")
        if few:
            text += "; untested (fewer than 2 common splits): " + ", ".join(
                f"`{m}`" for m in few)
        if unranked:
            text += "; not ranked (no predictive density): " + ", ".join(
                f"`{m}`" for m in unranked)
        rank = loo_ranking(table, d, task)
        if rank is not None:
            loo[d] = rank
            tau = rank["tau"]
            text += (f". LOO ranks the {rank['n']} methods with a LOO " + (
                "as held-out does" if np.isfinite(tau) and tau >= 1 - 1e-12 else
                f"differently (Kendall's tau {tau:.2f})" if np.isfinite(tau) else
                "with ties (no Kendall's tau)"))
            if rank["best_loo"] == rank["best_held"]:
                text += f" and puts `{rank['best_loo']}` first too"
            else:
                text += (f" and puts `{rank['best_loo']}` first (held-out: "
                         f"`{rank['best_held']}`)")
        out.append(text + ".")
        ranks[d] = means.rank(method="average")
    if len(ranks) >= 2:
        table_r = pd.DataFrame(ranks)  # methods x data sets, NaN where a method has no score
        mean = table_r.mean(axis=1).sort_values(kind="stable")
        count = table_r.notna().sum(axis=1)
        wins = {m: [d for d in ranks if ranks[d].get(m) == ranks[d].min()] for m in mean.index}
        text = (f"Across the {len(ranks)} data sets, mean rank by the held-out score (1 = "
                "best on a data set; averaged over the data sets where a method has one): "
                + ", ".join(f"`{m}` {mean[m]:.1f}" + (f" ({count[m]} of {len(ranks)} data "
                                                       "sets)" if count[m] < len(ranks)
                                                       else "")
                            for m in mean.index))
        best_on = [f"`{m}` on {', '.join(f'`{d}`' for d in w)}" for m, w in wins.items() if w]
        text += "; best: " + "; ".join(best_on)
        out.append(text + ".")
    if len(loo) >= 2:
        same = [d for d, r in loo.items() if r["best_loo"] == r["best_held"]]
        taus = [r["tau"] for r in loo.values() if np.isfinite(r["tau"])]
        out.append(f"LOO on the training split picks the held-out best on {len(same)} of "
                   f"{len(loo)} data sets" + (f" (mean Kendall's tau {np.mean(taus):.2f})"
                                             if taus else "")
                   + ("; choosing by LOO would have picked the same methods as the test "
                      "splits" if len(same) == len(loo) else "") + ".")
    return out


def _samples_hyperparameters(label: str) -> bool:
    """The study method ``label`` (``rvm/nuts:draws=300``) samples its hyperparameters
    (``Method.hyperparameters == "sampled"``): the reference the others are compared with."""
    head = label.split(":")[0]
    if head.startswith("sklearn="):
        return False
    method = METHODS.get(head.partition("/")[2])
    return method is not None and method.hyperparameters == "sampled"


# what each method of a study is (Methods in the report's glossary), by (family, method)
METHOD_TERMS = {
    ("rvm", "evidence"): "the relevance vector machine (RVM, Tipping 2001), its "
                         "hyperparameters by type-II maximum likelihood (the evidence) with "
                         "Tipping & Faul's (2003) fast sequential algorithm; a Gaussian "
                         "posterior of the weights (Laplace's approximation for "
                         "classification and counts)",
    ("rvm", "evidence-mackay"): "the RVM fitted by Tipping's (2001) re-estimation of the "
                                "hyperparameters (MacKay's updates), the same evidence "
                                "maximised more slowly",
    ("rvm*", "evidence"): "the `rvm/evidence` fit predicting as RVM* (Rasmussen & "
                          "Quiñonero-Candela 2005): a basis function added at each test "
                          "point, so the predictive variance grows away from the data",
    ("rvm", "vrvm"): "the variational RVM (Bishop & Tipping 2000): a factorised "
                     "approximation of the posterior of weights and hyperparameters, in "
                     "closed form",
    ("rvm", "advi"): "the RVM's PyMC model fitted by mean-field automatic differentiation "
                     "variational inference (ADVI, Kucukelbir et al. 2017): a Gaussian "
                     "with independent coordinates",
    ("rvm", "fullrank_advi"): "ADVI with a full-rank Gaussian (correlations kept)",
    ("rvm", "nuts"): "the RVM's full posterior sampled by the No-U-Turn sampler (NUTS, "
                     "Hoffman & Gelman 2014), the reference the approximations are "
                     "compared with",
    ("gp", "evidence"): "a Gaussian process (Rasmussen & Williams 2006, GPML) with the "
                        "kernel's hyperparameters maximising the marginal likelihood "
                        "(Laplace's approximation for classification): every training "
                        f"point kept; in regression above {GP_EXACT_MAX_N} training points, "
                        "the sparse GP of Titsias (2009) with its variational bound, on "
                        f"{GP_INDUCING} k-means inducing inputs (the `inducing` option sets "
                        "them; `inducing=none` keeps the exact GP)",
    ("gp", "nuts"): "a Gaussian process with its hyperparameters sampled by NUTS",
    ("svm", None): "a support vector machine (scikit-learn's SVR / SVC, Gaussian kernel, C "
                   "by cross-validation on the training split): points, no predictive "
                   "distribution",
}
_OPTION_TERMS = {
    "centres": "on a k-means dictionary of {} candidate centres (not every training point)",
    "inducing": "the sparse GP (Titsias 2009) on {} k-means inducing inputs",
    "chains": "{} chains", "draws": "{} draws each", "tune": "{} tuning steps",
    "loo": "leave-one-out by {}",
}
# abbreviations and terms of the report's text, defined when the report uses them
TEXT_TERMS = {
    "held-out": "on the test split, which the fit never saw",
    "LOO": "leave-one-out cross-validation: each training point predicted by the method "
           "fitted without it (estimated, see the LOO estimators above)",
    "elpd": "expected log pointwise predictive density, sum_n log p(t_n | the other "
            "points); here per point, so comparable with the held-out mean log density "
            "(higher is better)",
    "PSIS": "Pareto-smoothed importance sampling: leave-one-out from one posterior's draws, "
            "reweighted for each left-out point (Vehtari, Gelman & Gabry 2017)",
    "Pareto k": "the estimated tail shape of PSIS's importance weights (k-hat): above "
                "ArviZ's threshold (0.7 for large samples) that point's estimate is "
                "unreliable (Vehtari et al. 2024)",
    "paired t-test": "a t-test of the per-split differences between two methods over the "
                     "splits both finished, as in R&QC 2005 Table 1",
    "Holm": "Holm's (1979) step-down adjustment of the p-values of several comparisons: "
            "the chance that any of them calls two equal methods different stays below "
            "0.05",
    "Kendall's tau": "the rank correlation of two orders of the methods: 1 the same, -1 "
                     "reversed",
    "ESS": "effective sample size of a sampler's draws (bulk: of the centre; tail: of the "
           "5% and 95% quantiles)",
}


def _model_families(m: MethodSpec) -> list:
    """The registered model families (:mod:`~sparsebayes.inference.families`) a study
    family fits over its tasks, by kind; none for the scikit-learn baselines."""
    kinds = {kind for kind, _ in FAMILIES.get(m.family, {}).values()}
    return [MODEL_FAMILIES[k] for k in sorted(kinds) if k in MODEL_FAMILIES]


def _family_term(m: MethodSpec) -> str:
    """A method without its own entry in :data:`METHOD_TERMS`: its problem class's summary
    (the first phrase of its docstring) and the method, with the method's own description
    (``Method.description``)."""
    what = [f"{c.__doc__.strip().split(':')[0].split('.')[0]} (`{c.__name__}`)"
            for c in (f.problem_type for f in _model_families(m)) if c.__doc__]
    name = "; ".join(what) or f"`{m.family}`"
    if not m.method:
        return name
    method = METHODS.get(m.method)
    how = f" ({method.description})" if method is not None and method.description else ""
    return f"{name} fitted by `{m.method}`{how}"


def method_glossary(methods, short: dict[str, str]) -> list[str]:
    """One line per method of the study (by its short name in the tables): what it is
    (:data:`METHOD_TERMS`) and what its options change (:data:`_OPTION_TERMS`)."""
    lines = []
    for m in methods:
        name = short.get(m.label, m.label)
        if m.family == "sklearn":
            what = f"a scikit-learn estimator, `{m.method}`"
        else:
            what = METHOD_TERMS.get((m.family, m.method)) or _family_term(m)
        opts = [_OPTION_TERMS[k].format(v) for k, v in m.options if k in _OPTION_TERMS]
        sizes = sorted({dictionary_size(f) for f in _model_families(m) if f.weights})
        if "centres" not in dict(m.options) and sizes:
            opts.append(f"above {study_cells.RVM_CENTRES} training points on a k-means "
                        "dictionary of "
                        f"{' or '.join(map(str, sizes))} candidate centres (the `centres` "
                        "option sets it; `centres=none` keeps every training point)")
        rest = [f"{k}={v}" for k, v in m.options if k not in _OPTION_TERMS]
        if m.family != "sklearn" and (opts or rest):
            what += "; " + ", ".join(opts + ([f"options {', '.join(rest)}"] if rest else []))
        elif rest:
            what += f" ({', '.join(rest)})"
        lines.append(f"- `{name}`: {what}.")
    return lines


def method_colors(names) -> dict[str, str]:
    """One colour per method for the whole report (matplotlib's cycle, tab20 beyond ten)."""
    names = list(dict.fromkeys(names))
    if len(names) <= 10:
        return {m: f"C{i}" for i, m in enumerate(names)}
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    return {m: cmap(i % 20) for i, m in enumerate(names)}


# --------------------------------------------------------------------------------------
# figures (matplotlib's object API: no pyplot state, works without a display)
# --------------------------------------------------------------------------------------
def _figure(n_panels: int, width: float = 4.2, height: float = 3.4, ncols: int = 3):
    from matplotlib.figure import Figure

    ncols = min(ncols, n_panels)
    nrows = int(np.ceil(n_panels / ncols))
    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False).ravel())
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes


def _arrays(out: Path, cell: Cell) -> dict[str, np.ndarray] | None:
    path = cell.path(out).with_suffix(".npz")
    if not path.is_file():
        return None
    with np.load(path) as f:
        return dict(f)


def _relevant_x(a: dict[str, np.ndarray]) -> np.ndarray:
    """Input-space positions of a cell's relevance (or support) vectors (cells written
    before positions were stored hold training indices)."""
    if "relevant_x" in a:
        return a["relevant_x"]
    return a["X_train"][a["relevant"].astype(int)]


def _has_vectors(m: MethodSpec, task: str) -> bool:
    """Whether the method's model keeps relevance vectors (an RVM; a GP keeps every point)."""
    kind = FAMILIES[m.family][task][0]
    return kind not in MODEL_FAMILIES or MODEL_FAMILIES[kind].weights


def _plot_predictive(out: Path, data: DataSpec, methods, table, fig_path: Path,
                     colors: dict) -> bool:
    panels = [(m, a) for m in methods if (a := _arrays(out, Cell(data, 0, m, _seed(out))))
              is not None and "grid_mean" in a]
    if not panels:
        return False
    fig, axes = _figure(len(panels))
    for ax, (m, a) in zip(axes, panels):
        c = colors.get(_short(m, methods), "C0")
        g = a["grid"][:, 0]
        if "grid_lo" in a:
            ax.fill_between(g, a["grid_lo"], a["grid_hi"], color=c, alpha=0.2,
                            label="95% predictive")
        if "grid_truth" in a:
            ax.plot(g, a["grid_truth"], "k--", lw=1, label="truth")
        ax.plot(g, a["grid_mean"], color=c, label="predictive mean")
        ax.plot(a["X_train"][:, 0], a["y_train"], ".", color="0.5", ms=3, label="data")
        rx = _relevant_x(a)[:, 0]
        ax.plot(rx, np.interp(rx, g, a["grid_mean"]), "o", mfc="none", mec="k", ms=8,
                label="relevance / support vectors (on the mean)")
        row = table[(table["dataset"] == data.label) & (table["method"] == m.label)
                    & (table["split"] == 0)]
        rmse = float(row["rmse"].iloc[0]) if len(row) else np.nan
        vectors = f"{rx.size} vectors marked" if _has_vectors(m, data.info.task) else \
            "every training point (GP)"
        ax.set_title(f"{_short(m, methods)}\n{vectors}, test RMSE {_fmt(rmse)}", fontsize=9)
        ax.set_xlabel("x")
    axes[0].legend(fontsize=7, loc="best")
    fig.suptitle(f"{data.label}: split 0", fontsize=10)
    fig.savefig(fig_path, dpi=100)
    return True


def _plot_boundary(out: Path, data: DataSpec, methods, table, fig_path: Path,
                   colors: dict) -> bool:
    panels = [(m, a) for m in methods if (a := _arrays(out, Cell(data, 0, m, _seed(out))))
              is not None and "grid" in a and a["grid"].shape[1] == 2]
    if not panels:
        return False
    fig, axes = _figure(len(panels))
    for ax, (m, a) in zip(axes, panels):
        n = int(round(np.sqrt(a["grid"].shape[0])))
        G0, G1 = (a["grid"][:, k].reshape(n, n) for k in (0, 1))
        if "grid_proba" in a:
            P = a["grid_proba"].reshape(n, n)
            ax.contourf(G0, G1, P, levels=np.linspace(0, 1, 11), cmap="RdBu_r", alpha=0.35)
            ax.contour(G0, G1, P, levels=[0.25, 0.75], colors="0.4", linewidths=0.6,
                       linestyles="--")
            ax.contour(G0, G1, P, levels=[0.5], colors=[colors.get(_short(m, methods), "k")],
                       linewidths=1.8)
        elif "grid_score" in a:
            ax.contour(G0, G1, a["grid_score"].reshape(n, n), levels=[0.0],
                       colors=[colors.get(_short(m, methods), "k")], linewidths=1.8)
        X, y = a["X_train"], a["y_train"]
        for k, (c, mk) in enumerate((("C0", "o"), ("C3", "s"))):
            sel = y == np.unique(y)[min(k, np.unique(y).size - 1)]
            ax.plot(X[sel, 0], X[sel, 1], mk, color=c, ms=3, alpha=0.7)
        rx = _relevant_x(a)
        ax.plot(rx[:, 0], rx[:, 1], "o", mfc="none", mec="k", ms=10, mew=1.2)
        row = table[(table["dataset"] == data.label) & (table["method"] == m.label)
                    & (table["split"] == 0)]
        err = float(row["error_rate"].iloc[0]) * 100 if len(row) else np.nan
        vectors = f"{len(rx)} vectors circled" if _has_vectors(m, CLASSIFICATION) else \
            "every training point (GP)"
        ax.set_title(f"{_short(m, methods)}\n{vectors}, test error "
                     f"{_fmt(err, 1)}%", fontsize=9)
        ax.set_xlabel("$x_1$")
        ax.set_ylabel("$x_2$")
    fig.suptitle(f"{data.label}: split 0 (p = 0.5 boundary solid, 0.25/0.75 dashed)",
                 fontsize=10)
    fig.savefig(fig_path, dpi=100)
    return True


def _plot_summary(table: pd.DataFrame, dataset: str, task: str, fig_path: Path,
                  colors: dict) -> bool:
    fig = summary_figure(table, dataset, task, colors)
    if fig is None:
        return False
    fig.savefig(fig_path, dpi=100)
    return True


def _readable_ticks(axis) -> None:
    """At most 4 ticks, and a scientific offset or factor where the values need more than
    a few digits (losses of 0.01075 ... 0.01125 read 1.075 ... 1.125 with "1e-2" at the
    end of the axis), so that a narrow panel's tick labels do not run together."""
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    axis.set_major_locator(MaxNLocator(nbins=4, min_n_ticks=2))
    fmt = ScalarFormatter(useOffset=True, useMathText=True)
    fmt.set_powerlimits((-3, 4))
    axis.set_major_formatter(fmt)


def summary_figure(table: pd.DataFrame, dataset: str, task: str, colors: dict):
    """Each method's per-split losses (ticks) with their mean and its 95% t-interval over
    the ``n`` splits it finished (bar), one panel per loss of :data:`LOSSES` (a matplotlib
    ``Figure``, or None with no loss to show)."""
    sub = table[(table["dataset"] == dataset) & (table["status"] == "ok")]
    losses = [(c, n, k) for c, n, k in LOSSES[task] if c in sub and sub[c].notna().any()]
    if not losses:
        return None
    methods = list(dict.fromkeys(sub["method"]))
    fig, axes = _figure(len(losses), width=4.0, height=0.5 + 0.42 * len(methods) + 0.6)
    for ax, (col, name, scale) in zip(axes, losses):
        for i, m in enumerate(methods):
            v = sub.loc[sub["method"] == m, col].to_numpy(float) * scale
            v = v[np.isfinite(v)]
            if not v.size:
                ax.text(0.5, i, "n/a", transform=ax.get_yaxis_transform(), ha="center",
                        va="center", fontsize=8, color="0.4")
                continue
            ax.plot(v, np.full(v.size, i), "|", color=colors.get(m, "C0"), alpha=0.5, ms=8)
            mean = v.mean()
            half = stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size) \
                if v.size > 1 else 0.0
            ax.errorbar(mean, i, xerr=half, fmt="o", color=colors.get(m, "C0"), capsize=4,
                        lw=2)
        counts = sub.groupby("method")["split"].nunique()
        ax.set_yticks(range(len(methods)), [f"{m} (n={counts[m]})" for m in methods],
                      fontsize=8)
        ax.set_ylim(len(methods) - 0.5, -0.5)
        ax.set_xlabel(name)
        ax.grid(axis="x", alpha=0.3)
        _readable_ticks(ax.xaxis)
    for ax in axes[1:len(losses)]:
        ax.tick_params(labelleft=False)
    fig.suptitle(f"{dataset}: each split (ticks), mean and 95% t-interval over splits",
                 fontsize=10)
    return fig


def _plot_sparsity(table: pd.DataFrame, fig_path: Path, colors: dict) -> bool:
    ok = table[(table["status"] == "ok") & table["n_relevant"].notna()]
    datasets = list(dict.fromkeys(ok["dataset"]))
    if not datasets:
        return False
    from matplotlib.ticker import NullFormatter

    style = {m: i for i, m in enumerate(dict.fromkeys(table["method"]))}  # same in every panel
    fig, axes = _figure(len(datasets), width=4.6)
    for ax, d in zip(axes, datasets):
        sub = ok[ok["dataset"] == d]
        task = sub["task"].iloc[0]
        col, name, scale = ("rmse", "test RMSE", 1.0) if task != CLASSIFICATION else \
            ("error_rate", "test error %", 100.0)
        for m, grp in sub.groupby("method", sort=False):
            i = style[m]
            ax.plot(grp["n_relevant"], grp[col] * scale, "os^vDP*X"[i % 8], color=colors[m],
                    label=m, alpha=0.8, ls="none")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("relevance / support vectors")
        ax.set_ylabel(name)
        ax.set_title(d, fontsize=9)
        ax.legend(fontsize=7)
    fig.savefig(fig_path, dpi=100)
    return True


def warnings_table(warn: pd.DataFrame) -> pd.DataFrame:
    """One row per data set, method and text of warnings (``warnings`` of the cells that
    warned), with the splits that gave it; each warning shortened to whole sentences."""
    rows = []
    for (d, m, text), grp in warn.groupby(["dataset", "method", "warnings"], sort=False):
        rows.append({"data set": d, "method": m, "splits": ", ".join(
            str(int(s)) for s in sorted(grp["split"])), "warnings": whole_sentences(text)})
    return pd.DataFrame(rows, columns=["data set", "method", "splits", "warnings"])


def _plot_posteriors(out: Path, data: DataSpec, methods, fig_path: Path,
                     colors: dict) -> str | None:
    """Posterior comparison of the RVM fits of split 0 (:func:`plots.plot_posteriors`:
    weights, ``log10 alpha`` and, for 1-D regression, the predictive bands), only between
    fits on the same basis functions (the largest such group: a weight ``c11`` of a
    50-centre dictionary is another function than ``c11`` of a 30-centre one). Returns
    None (no figure), or a caption naming the methods compared and those left out."""
    from sparsebayes.inference.compare import basis_key
    from sparsebayes.inference.plots import plot_posteriors

    groups: dict = {}
    arrays = None
    for m in methods:
        cell = Cell(data, 0, m, _seed(out))
        path = cell.path(out).with_suffix(".zarr")
        if m.family == "rvm" and path.is_dir():  # rvm* shares the rvm posterior
            post = load_posterior(path)
            groups.setdefault(basis_key(post), {})[_short(m, methods)] = post
            arrays = arrays or _arrays(out, cell)
    posts = max(groups.values(), key=len, default={})
    if len(posts) < 2:
        return None
    left = [name for g in groups.values() if g is not posts for name in g]
    extra = {}
    if arrays is not None and data.info.task != CLASSIFICATION and arrays["grid"].shape[1] == 1:
        extra = {"X": arrays["grid"], "X_train": arrays["X_train"],
                 "t_train": arrays["y_train"]}
    try:
        fig = plot_posteriors(posts, max_weights=12, colors=colors, **extra)
        fig.suptitle(f"{data.label}: split 0", fontsize=10)
        fig.subplots_adjust(top=0.85)
        fig.savefig(fig_path, dpi=90)
        import matplotlib.pyplot as plt

        plt.close(fig)
    except Exception as exc:  # a figure must not stop the report
        return f"(posterior comparison failed: {type(exc).__name__}: {exc})"
    caption = ("Posterior comparison on one basis (" + ", ".join(f"`{n}`" for n in posts)
               + "; pruned weights at 0)")
    if left:
        caption += ("; not shown, fitted on other basis functions (another dictionary or "
                    "width): " + ", ".join(f"`{n}`" for n in left))
    return caption + "."


def _short(m: MethodSpec, methods) -> str:
    """``family/method`` (an estimator's class name) without its options when that names one
    method of the study."""
    head = m.family if m.method is None else f"{m.family}/{m.method}"
    if m.family == "sklearn":
        head = m.method.rpartition(".")[2]
    same = [x for x in methods if (x.family, x.method) == (m.family, m.method)]
    return head if len(same) == 1 else m.label


def _data_spec(label: str, manifest: dict, table: pd.DataFrame) -> DataSpec:
    """The data spec of a manifest label; the user's data from the manifest alone."""
    digest = manifest.get("digests", {}).get(label)
    if digest is None:
        return DataSpec.parse(label)
    name, options = parse_spec(label, "data")  # keep folds=5 etc.: the table's label
    rows = table[table["dataset"] == label] if len(table) else table
    task = rows["task"].iloc[0] if len(rows) else REGRESSION
    note = manifest.get("user_data", {}).get(label, {}).get("description", name)
    info = DataInfo(name, task, "user", note, 1.0, loader=None)
    return DataSpec(name, tuple(sorted(options.items())), digest, info)


def _seed(out: Path) -> int:
    return int(json.loads((out / MANIFEST).read_text())["seed"])


# --------------------------------------------------------------------------------------
def write_report(out: str | os.PathLike, table: pd.DataFrame | None = None) -> Path:
    """Write ``report.md`` and ``figures/*.png`` for the study in ``out``; return the path
    of the report. Every Markdown link is relative to ``out``."""
    out = Path(out)
    manifest = json.loads((out / MANIFEST).read_text()) if (out / MANIFEST).is_file() \
        else None
    if manifest is None:
        raise FileNotFoundError(f"{out} holds no study ({MANIFEST} not found); run "
                                f"'sparsebayes study --out {out}' first")
    if table is None:
        table = load_table(out)
    table.to_csv(out / TABLE, index=False)
    data = [_data_spec(d, manifest, table) for d in manifest["data"]]
    methods = [spec_from_label(m) for m in manifest["methods"]]
    figdir = out / "figures"
    figdir.mkdir(exist_ok=True)
    for old in figdir.glob("*.png"):
        old.unlink()
    skipped = json.loads((out / "skipped.json").read_text()) \
        if (out / "skipped.json").is_file() else []

    lines = [
        "# Method comparison study",
        "",
        f"Written {datetime.datetime.now():%Y-%m-%d %H:%M} by `sparsebayes report`. "
        f"Data sets: {', '.join(f'`{d}`' for d in manifest['data'])}; methods: "
        f"{', '.join(f'`{m}`' for m in manifest['methods'])}; up to {manifest['splits']} "
        f"splits; seed {manifest['seed']}. Every row of the study is in "
        f"[{TABLE}]({TABLE}).",
        "",
    ]
    short = {m.label: _short(m, methods) for m in methods}
    shown = table.assign(method=table["method"].map(lambda x: short.get(x, x))) \
        if len(table) else table
    found = study_conclusion(shown, [d.label for d in data])
    if found:
        lines += ["## Conclusion", "", *[f"- {x}" for x in found], "",
                  "Each data set's section below has the tables, the tests and the "
                  "figures behind these lines.", ""]
    lines += [
        "Tables show mean ± sd over the splits a method finished. Real data sets are "
        "standardised on each training split (regression targets too), so regression losses "
        "are in units of the training sd. `svm`'s vectors are support vectors; the methods, "
        "every column and the abbreviations are defined under Glossary at the end.",
        "",
    ]
    if len(table) and "loo_estimator" in table:
        used = [e for e in ESTIMATORS if table["loo_estimator"].eq(e).any()]
        if used:
            lines += ["LOO estimators (each data set's LOO table says which ran): " + "; ".join(
                f"`{e}`: {ESTIMATORS[e]}" for e in used) + ". LOO time is not in the fit "
                "time.", ""]
    if len(table) and "probabilistic" in table:
        point = list(dict.fromkeys(table.loc[table["probabilistic"] == 0, "method"]))
        if point:
            lines += [f"{', '.join(f'`{m}`' for m in point)} give no predictive "
                      "distribution (no `predict_proba` or `predict(X, return_std=True)`): "
                      "their NLPD, coverage, log loss and Brier score are marked n/a.", ""]
    n_failed = int((table["status"] != "ok").sum()) if len(table) else 0
    user = manifest.get("user_data", {})
    given = [user.get(d, {}).get("spec") or d for d in manifest["data"]]
    command = shlex.join(["sparsebayes", "study", "--data", ",".join(given),
                          "--methods", ",".join(manifest["methods"]), "--splits",
                          str(manifest["splits"]), "--seed", str(manifest["seed"]), "--out",
                          str(out), "--resume"])
    in_memory = [d for d in manifest["data"] if d in user and not user[d].get("spec")]
    if in_memory:
        command = (f"# {', '.join(in_memory)}: data given in Python; pass them again to "
                   "run_study(..., resume=True)\n" + command)
    lines += [f"Cells finished: {len(table)} ({n_failed} failed). To reproduce or complete "
              "the study (finished cells are reused):", "", "```bash", command, "```", ""]
    renamed = [f"`{short[m.label]}`: `{m.label}`" if m.family == "sklearn" else
               f"`{short[m.label]}`: {m.label.partition(':')[2].replace(':', ', ')}"
               for m in methods if short[m.label] != m.label]
    if renamed:
        lines += ["Method options (tables show the short names): " + "; ".join(renamed) + ".",
                  ""]
    colors = method_colors(short[m.label] for m in methods)  # one per method, every figure
    lines += ["Fit times exclude compilation, shown apart (`compile s (total)`); "
              "leave-one-out and prediction times are not in them either. For methods that "
              "keep every weight the figures mark `relevance vectors` centres, those with "
              "the smallest posterior mean `alpha`.", ""]
    if len(table):
        fig = figdir / "sparsity_vs_error.png"
        if _plot_sparsity(shown, fig, colors):
            lines += ["![sparsity vs error](figures/sparsity_vs_error.png)", ""]

    for d in data:
        sub = table[table["dataset"] == d.label] if len(table) else table
        lines += [f"## `{d.label}`", "", f"{d.info.description}. Task: {d.info.task}.", ""]
        ok = sub[sub["status"] == "ok"] if len(sub) else sub
        if not len(ok):
            lines += ["No cell of this data set finished." if len(sub) else
                      "No cell of this data set ran.", ""]
            if len(sub):
                lines += [_markdown(pd.DataFrame({
                    "split": sub["split"], "method": sub["method"],
                    "error": sub["error"].map(whole_sentences)})), ""]
            continue
        first = ok.iloc[0]
        lines += [f"Training size {first['n_train']:.0f}, test size {first['n_test']:.0f}, "
                  f"{first['n_features']:.0f} inputs.", "",
                  _markdown(summary_table(shown, d.label)), ""]
        loo = loo_table(shown, d.label)
        if len(loo):
            lines += [f"Leave-one-out on the training split beside the test split. {LOO_TERMS}",
                      "", _markdown(loo), ""]
        found = conclusions(shown, d.label, d.info.task)
        if found:
            lines += ["### What this study shows", "",
                      *[f"- {x}" for x in found], ""]
        stem = d.label.replace(":", "_").replace("=", "")
        if _plot_summary(shown, d.label, d.info.task, figdir / f"{stem}_summary.png",
                         colors):
            lines += [f"![losses with 95% intervals](figures/{stem}_summary.png)", ""]
        for col, name, scale in LOSSES[d.info.task]:
            if col not in sub or sub[col].isna().all():
                continue  # the mean loss in the heading's unit (p-values do not change)
            pt = paired_tests(shown.assign(**{col: shown[col] * scale}), d.label, col)
            if pt.shape[1] < 2:
                continue
            lines += [f"Paired t-tests, {name}: two-sided p-values over the common splits "
                      "(R&QC 2005 Table 1 layout; first row the mean loss), uncorrected; the "
                      "conclusions above correct for the comparisons they make (Holm). `•`: "
                      "a method against itself; `equal`: the same loss on every common "
                      "split (no test); `n<2`: fewer than two common splits.", "",
                      _markdown(pt.reset_index().rename(columns={"index": ""})), ""]
        name = f"{stem}_predictive.png" if d.info.task != CLASSIFICATION else \
            f"{stem}_boundary.png"
        plot = _plot_predictive if d.info.task != CLASSIFICATION else _plot_boundary
        if plot(out, d, methods, table, figdir / name, colors):
            what = "Predictive mean and 95% band, relevance (or support) vectors marked" \
                if d.info.task != CLASSIFICATION else \
                "Decision boundary, relevance (or support) vectors circled"
            lines += [f"![{what}](figures/{name})", ""]
        post_name = f"{stem}_posteriors.png"
        note = _plot_posteriors(out, d, methods, figdir / post_name, colors)
        if note and (figdir / post_name).is_file():
            lines += [f"![posterior comparison](figures/{post_name})", "", note, ""]
        elif note:
            lines += [note, ""]
    failed = table[table["status"] != "ok"] if len(table) else table
    if len(failed):
        lines += ["## Failed cells", "", _markdown(pd.DataFrame({
            "data set": failed["dataset"], "split": failed["split"],
            "method": failed["method"], "error": failed["error"].map(whole_sentences)})),
                  ""]
    if len(table) and "n_warnings" in table and table["n_warnings"].fillna(0).sum() > 0:
        warn = shown[shown["n_warnings"].fillna(0) > 0]
        lines += ["## Warnings", "", "The same warnings of a method on one data set are one "
                  "row, with the splits that gave them; every cell's full text is in "
                  f"[{TABLE}]({TABLE}).", "", _markdown(warnings_table(warn)), ""]
    if skipped:
        lines += ["## Not run", "", _markdown(pd.DataFrame(skipped)), ""]
    body = "\n".join(lines)
    used = {k: v for k, v in TEXT_TERMS.items() if k in body}
    lines += ["## Glossary", "", "### Methods", "", *method_glossary(methods, short), "",
              "### Terms", "", *[f"- **{k}**: {v}." for k, v in {**TERMS, **used}.items()],
              ""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    write_html(out)
    return path


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto;
        padding: 0 1em; line-height: 1.45; color: #222; }}
table {{ border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }}
th {{ background: #f2f2f2; }}
tr:nth-child(even) td {{ background: #fafafa; }}
img {{ max-width: 100%; height: auto; }}
code {{ background: #f4f4f4; padding: 0 0.2em; }}
pre {{ background: #f4f4f4; padding: 0.6em; overflow-x: auto; }}
</style></head>
<body>
{body}
</body></html>
"""


def _data_uri(path: Path, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def write_html(out: str | os.PathLike) -> Path:
    """``report.html``: ``report.md`` of the study in ``out`` rendered by markdown-it-py
    (CommonMark and tables), every figure and ``results.csv`` embedded as a data: URI, so the
    one file opens in any browser on its own."""
    from markdown_it import MarkdownIt

    out = Path(out)
    md = (out / "report.md").read_text()
    body = MarkdownIt("commonmark").enable("table").render(md)

    def embed(match: re.Match) -> str:
        attr, link = match.group(1), html.unescape(match.group(2))
        target = out / link
        if "://" in link or link.startswith("data:") or not target.is_file():
            return match.group(0)
        mime = {".png": "image/png", ".csv": "text/csv"}.get(target.suffix,
                                                             "application/octet-stream")
        extra = f' download="{html.escape(target.name)}"' if attr == "href" else ""
        return f'{attr}="{_data_uri(target, mime)}"{extra}'

    body = re.sub(r'(src|href)="([^"]+)"', embed, body)
    path = out / "report.html"
    path.write_text(_PAGE.format(title="Method comparison study", body=body))
    return path
