"""Execute the notebooks (jupytext percent scripts) into ``.ipynb`` files with outputs.

    python notebooks/run.py                  # every notebook, full size
    python notebooks/run.py 03 05            # the notebooks whose names start so
    python notebooks/run.py --small          # quick versions (SPARSEBAYES_SMALL=1)

Each ``notebooks/NN_name.py`` is run in a fresh ``python3`` kernel (nbclient) and written
next to it as ``NN_name.ipynb`` (ignored by git: the ``.py`` files are the source). The
real-data notebooks read ``$SPARSEBAYES_DATA`` (default here: ``../shared/data`` beside the
repository, if it exists) and fall back to built-in data without it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    import jupytext
    import nbclient

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook name prefixes (default: all)")
    parser.add_argument("--small", action="store_true", help="SPARSEBAYES_SMALL=1")
    args = parser.parse_args(argv)
    paths = sorted(HERE.glob("[0-9]*.py"))
    if args.names:
        paths = [p for p in paths if any(p.stem.startswith(n) for n in args.names)]
        if not paths:
            parser.error(f"no notebook starts with {args.names}; have "
                         f"{[p.stem for p in sorted(HERE.glob('[0-9]*.py'))]}")
    if args.small:
        os.environ["SPARSEBAYES_SMALL"] = "1"  # the kernel inherits the environment
    shared = HERE.parent.parent / "shared" / "data"
    if "SPARSEBAYES_DATA" not in os.environ and shared.is_dir():
        os.environ["SPARSEBAYES_DATA"] = str(shared)
    for path in paths:
        nb = jupytext.read(path)
        start = time.perf_counter()
        client = nbclient.NotebookClient(nb, timeout=None, kernel_name="python3",
                                         resources={"metadata": {"path": str(HERE)}})
        client.execute()
        out = path.with_suffix(".ipynb")
        jupytext.write(nb, out)
        print(f"{out} written ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
