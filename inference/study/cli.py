"""``sparsebayes study`` (a comparison study and its report), ``report`` and ``datasets``."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["add_parsers", "study", "report", "datasets", "COMMANDS"]


def _cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def add_parsers(sub) -> None:
    from sparsebayes.inference.study import DEFAULT_STUDY

    p = sub.add_parser(
        "study", help="run a comparison study (data sets x splits x methods) and its report",
        description="Run a comparison study and write results.csv, per-cell results and "
        "report.md to --out. Without --data/--methods it runs the default study on built-in "
        "data: " + ", ".join(DEFAULT_STUDY["data"]) + ".")
    p.add_argument("--data", help="comma-separated data specs, name[:key=value...] (see "
                   "'sparsebayes datasets') or your own file PATH.csv:target=COLUMN"
                   "[:task=classification] (.parquet too)")
    p.add_argument("--methods", help="comma-separated method specs family/method[:key=value"
                   "...], e.g. rvm/evidence,rvm*/evidence,gp/evidence,rvm/nuts:draws=500,svm,"
                   "or any scikit-learn estimator: "
                   "sklearn=sklearn.ensemble.RandomForestRegressor:n_estimators=200")
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
    p_report = sub.add_parser("report", help="(re)write report.md and report.html of a "
                              "study folder")
    p_report.add_argument("out", type=Path)
    p_data = sub.add_parser("datasets", help="list data sets and which data files are found")
    p_data.add_argument("--data-dir", type=Path)


def _written(path: Path) -> str:
    """Where the report is: ``report.md`` and the self-contained ``report.html`` beside it."""
    return f"report written to {path} and {path.with_name('report.html')}"


def report(args) -> int:
    from sparsebayes.inference.study.report import write_report

    print(_written(write_report(args.out)))
    return 0


def study(args) -> int:
    from sparsebayes.inference.study import DEFAULT_STUDY, SMALL_STUDY, run_study
    from sparsebayes.inference.study.report import whole_sentences, write_report

    base = SMALL_STUDY if args.small else DEFAULT_STUDY
    data = args.data or ",".join(base["data"])
    methods = args.methods or ",".join(base["methods"])
    splits = args.splits  # 0 is refused by run_study, not read as "the default"
    if splits is None:
        splits = base["splits"] if not (args.data or args.methods) else 10
    table = run_study(data, methods, splits, args.out, seed=args.seed, n_jobs=args.n_jobs,
                      scheduler=args.scheduler, resume=args.resume,
                      retry_failed=args.retry_failed, data_dir=args.data_dir,
                      progress=not args.no_progress, timeout=args.timeout)
    failed = table[table["status"] != "ok"] if len(table) else table
    print(f"{len(table)} cells, {len(failed)} failed; table {args.out / 'results.csv'}")
    if len(failed):  # why, once per method and error
        for (method, error), grp in list(failed.groupby(["method", "error"], sort=False))[:5]:
            print(f"  {method} failed on {len(grp)} cell(s): {whole_sentences(error)}")
    if not args.no_report:
        print(_written(write_report(args.out, table)))
    return 0


def datasets(args) -> int:
    from sparsebayes.models.datasets import catalogue

    table = catalogue(args.data_dir)
    folder = args.data_dir or os.environ.get("SPARSEBAYES_DATA")
    where = Path(folder).expanduser().resolve() if folder else "none"
    print(f"data directory: {where} (--data-dir or $SPARSEBAYES_DATA); your own data: "
          "--data PATH.csv:target=COLUMN\n")
    for source, grp in table.groupby("source", sort=False):
        print(f"{source}:")
        for _, r in grp.iterrows():
            state = "" if r["available"] else f"  [missing: {r['missing']}]"
            print(f"  {r['name']:24s} {r['task']:15s}{state}\n      {r['description']}")
    return 0


COMMANDS = {"study": study, "report": report, "datasets": datasets}
