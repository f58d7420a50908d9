"""Every notebook in ``notebooks/`` (jupytext percent scripts) executes end to end at
small size (``SPARSEBAYES_SMALL=1``) through jupytext + nbclient, as a user would run it.

``make test`` builds the documentation beside the tests, which executes the same notebooks at
the same size and fails on any cell's error (``docs/conf.py``); where that build has finished
and its executed copy (``docs/_build/jupyter_execute/examples``) is newer than the
notebook's source, the checks read it instead of executing the notebook a second time."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DATA

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.py"))
EXECUTED = ROOT / "docs" / "_build" / "jupyter_execute" / "examples"


def executed_by_the_docs(path: Path):
    """The copy of the notebook ``path`` that a docs build executed without its cache
    (``make test``: the mark ``.forced``) after the notebook and the package last changed,
    else None."""
    import nbformat

    mark, done = EXECUTED.parent / ".forced", EXECUTED / f"{path.stem}.ipynb"
    sources = [path, *(ROOT / "models").rglob("*.py"), *(ROOT / "inference").rglob("*.py")]
    if mark.is_file() and done.is_file() and mark.stat().st_mtime > max(
            f.stat().st_mtime for f in sources):
        return nbformat.read(done, as_version=4)
    return None


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    jupytext = pytest.importorskip("jupytext")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("SPARSEBAYES_SMALL", "1")
    monkeypatch.setenv("SPARSEBAYES_DATA", str(DATA))  # absent: the notebooks generate data
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel shows figures inline
    nb = executed_by_the_docs(path)
    if nb is None:
        nb = jupytext.read(path)
        assert nb.metadata["kernelspec"]["name"] == "python3"
        client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                         resources={"metadata": {"path": str(tmp_path)}})
        client.execute()  # raises CellExecutionError with the failing cell's traceback
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    # a notebook without ipywidgets shows a text bar, not tqdm.auto's "IProgress not found"
    stderr = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                     for o in c.get("outputs", []) if o.get("name") == "stderr")
    assert "TqdmWarning" not in stderr
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert images, "a notebook that shows no figure"
