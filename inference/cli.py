"""Command line: ``sparsebayes study`` (comparison study + report), ``report``, ``datasets``
and ``demo`` (the sinc figure of Tipping 2001 §4.1)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from .study import cli as study_cli

__all__ = ["main"]


def demo(out: Path, n: int = 100, seed: int = 0) -> Path:
    """Tipping (2001) §4.1: RVM regression on noisy sinc with both evidence algorithms;
    writes a figure of the predictive bands with the relevance vectors circled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sparsebayes.inference import fit, predict
    from sparsebayes.models import GaussianKernel, RVMRegression

    rng = np.random.default_rng(seed)
    x = np.linspace(-10, 10, n)
    t = np.sinc(x / np.pi) + rng.uniform(-0.2, 0.2, n)
    grid = np.linspace(-12, 12, 400)
    truth = np.sinc(grid / np.pi)
    problem = RVMRegression(x[:, None], t, kernel=GaussianKernel(3.0))
    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, method in zip(axes, ("evidence", "evidence-mackay")):
        post = fit(problem, method=method, seed=seed)
        pred = predict(post, grid[:, None])
        lo, hi = pred.interval(0.95)
        rms = np.sqrt(np.mean((predict(post, x[:, None]).mean - np.sinc(x / np.pi)) ** 2))
        idx = post["constant_data"]["centre_index"].values
        rv = idx[idx >= 0]
        ax.fill_between(grid, lo, hi, color="C0", alpha=0.2, label="95% predictive")
        ax.plot(grid, truth, "k--", lw=1, label="sinc(x)")
        ax.plot(grid, pred.mean, "C0", label="predictive mean")
        ax.plot(x, t, ".", color="0.5", ms=4, label="data")
        ax.plot(x[rv], t[rv], "o", mfc="none", mec="C3", ms=10, label="relevance vectors")
        ax.set_title(f"{method}: {post.attrs['n_relevant']} RVs, RMS {rms:.4f}, "
                     f"{post.attrs['wall_time'] * 1e3:.0f} ms")
        ax.set_xlabel("x")
        print(f"{method:16s} relevance vectors {post.attrs['n_relevant']:3d}  "
              f"RMS vs truth {rms:.4f}  log evidence {post.attrs['log_evidence']:.3f}  "
              f"noise sd {float(post['gaussian_posterior']['beta']) ** -0.5:.4f}")
    axes[0].legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    path = out / "sinc_demo.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"figure written to {path}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sparsebayes", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="fit and plot the sinc example (Tipping 2001 §4.1)")
    p_demo.add_argument("--out", type=Path, default=Path("results"))
    p_demo.add_argument("--seed", type=int, default=0)
    study_cli.add_parsers(sub)
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            demo(args.out, seed=args.seed)
        else:
            return study_cli.COMMANDS[args.command](args)
    except (ValueError, TypeError, FileNotFoundError, FileExistsError, ConnectionError,
            ImportError) as exc:
        print(f"sparsebayes {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished cells are saved; re-run with --resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
