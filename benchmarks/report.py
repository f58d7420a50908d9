"""Markdown tables and the report file shared by the benchmark scripts."""

from __future__ import annotations

from pathlib import Path


def markdown_table(rows: list[dict]) -> list[str]:
    """Rows of dicts as a markdown table (columns in first-seen order; floats to 4 digits)."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(
            f"{r[c]:.4g}" if isinstance(r.get(c), float) else str(r.get(c, ""))
            for c in cols) + " |")
    return lines


def write_report(lines: list[str], out: str | Path) -> None:
    """Print the report and write it to ``out``."""
    text = "\n".join(lines)
    print(text)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text)


def timed(f, *args, **kwargs):
    """``f(*args, **kwargs)`` with its warnings silenced, and its wall time in seconds."""
    import time
    import warnings

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = f(*args, **kwargs)
    return out, time.perf_counter() - start



def run_in_tree(module: str, call: str, before: str | None) -> dict:
    """``module.call`` (a JSON-able dict) in its own process with one BLAS thread, with the
    package imported from the checkout ``before`` (holding ``sparsebayes/models`` and
    ``sparsebayes/inference``), else from this tree; ``{"error": last line}`` if it failed."""
    import json
    import os
    import subprocess
    import sys

    here = str(Path(__file__).resolve().parent)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    code = (f"import sys, json; sys.path.insert(0, {before!r}) if {before!r} != 'None' "
            f"else None; sys.path.insert(0, {here!r}); "
            f"import {module} as b; print(json.dumps(b.{call}))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=False)
    if res.returncode:
        return {"error": res.stderr.strip().splitlines()[-1]}
    return json.loads(res.stdout.strip().splitlines()[-1])
