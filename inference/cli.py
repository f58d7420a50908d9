"""Command line: ``sparsebayes study`` (comparison study + report), ``report``, ``datasets``
and ``demo`` (the sinc figure of Tipping 2001 §4.1)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

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


def _cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _study_parser(sub) -> None:
    from sparsebayes.inference.study import DEFAULT_STUDY

    p = sub.add_parser(
        "study", help="run a comparison study (data sets x splits x methods) and its report",
        description="Run a comparison study and write results.csv, per-cell results and "
        "report.md to --out. Without --data/--methods it runs the default study on built-in "
        "data: " + ", ".join(DEFAULT_STUDY["data"]) + ".")
    p.add_argument("--data", help="comma-separated data specs, name[:key=value...] "
                   "(see 'sparsebayes datasets')")
    p.add_argument("--methods", help="comma-separated method specs family/method[:key=value"
                   "...], e.g. rvm/evidence,rvm*/evidence,gp/evidence,rvm/nuts:draws=500,svm")
    p.add_argument("--splits", type=int, help="splits per data set (default 10; the default "
                   f"study uses {DEFAULT_STUDY['splits']})")
    p.add_argument("--out", type=Path, default=Path("results/study"),
                   help="output folder (default results/study)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-jobs", type=int, default=_cpus(),
                   help=f"local worker processes (default: the CPUs available, {_cpus()})")
    p.add_argument("--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.1:8786")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds to wait for the Dask scheduler (default 5)")
    p.add_argument("--resume", action="store_true",
                   help="continue the study in --out: compute only the missing cells")
    p.add_argument("--retry-failed", action="store_true",
                   help="with --resume, also recompute the cells that failed")
    p.add_argument("--data-dir", type=Path,
                   help="folder of the real data files (default $SPARSEBAYES_DATA)")
    p.add_argument("--small", action="store_true",
                   help="smoke test: the default data, 2 splits, evidence methods and SVM only")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-report", action="store_true")


def study(args) -> int:
    from sparsebayes.inference.report import write_report
    from sparsebayes.inference.study import DEFAULT_STUDY, SMALL_STUDY, run_study

    base = SMALL_STUDY if args.small else DEFAULT_STUDY
    data = args.data or ",".join(base["data"])
    methods = args.methods or ",".join(base["methods"])
    splits = args.splits or (base["splits"] if not (args.data or args.methods) else 10)
    table = run_study(data, methods, splits, args.out, seed=args.seed, n_jobs=args.n_jobs,
                      scheduler=args.scheduler, resume=args.resume,
                      retry_failed=args.retry_failed, data_dir=args.data_dir,
                      progress=not args.no_progress, timeout=args.timeout)
    n_failed = int((table["status"] != "ok").sum()) if len(table) else 0
    print(f"{len(table)} cells, {n_failed} failed; table {args.out / 'results.csv'}")
    if not args.no_report:
        print(f"report written to {write_report(args.out, table)}")
    return 0


def datasets(data_dir: Path | None) -> int:
    from sparsebayes.inference.study import available_datasets

    table = available_datasets(data_dir)
    folder = data_dir or os.environ.get("SPARSEBAYES_DATA") or "."
    print(f"data directory: {Path(folder).expanduser().resolve()} "
          "(--data-dir or $SPARSEBAYES_DATA)\n")
    for source, grp in table.groupby("source", sort=False):
        print(f"{source}:")
        for _, r in grp.iterrows():
            state = "" if r["available"] else f"  [missing: {r['missing']}]"
            print(f"  {r['name']:24s} {r['task']:15s}{state}\n      {r['description']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sparsebayes", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="fit and plot the sinc example (Tipping 2001 §4.1)")
    p_demo.add_argument("--out", type=Path, default=Path("results"))
    p_demo.add_argument("--seed", type=int, default=0)
    _study_parser(sub)
    p_report = sub.add_parser("report", help="(re)write report.md of a study folder")
    p_report.add_argument("out", type=Path)
    p_data = sub.add_parser("datasets", help="list data sets and which data files are found")
    p_data.add_argument("--data-dir", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            demo(args.out, seed=args.seed)
        elif args.command == "study":
            return study(args)
        elif args.command == "report":
            from sparsebayes.inference.report import write_report

            print(f"report written to {write_report(args.out)}")
        elif args.command == "datasets":
            return datasets(args.data_dir)
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
