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

