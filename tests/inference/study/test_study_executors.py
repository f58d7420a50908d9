"""Study executors (inference/study/executors.py) against each other: in-process, local
processes, a Dask ``LocalCluster``; a killed study resumes with only its missing cells."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import STUDY_DATA as DATA
from conftest import STUDY_METHODS as METHODS

from sparsebayes.inference import study as st
from sparsebayes.inference.cli import main


def _processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds ``marker`` (Linux /proc)."""
    pids = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker.encode() in env.read_bytes().split(b"\0"):
                pids.append(int(env.parent.name))
        except OSError:  # gone meanwhile, or not ours
            pass
    return pids


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("user", [False, True], ids=["built-in", "csv+estimator"])
def test_resume_after_kill_computes_only_missing_cells(tmp_path, user, same_table):
    """Kill a running `sparsebayes study` half-way (at most 9 of its 18 cells kept, so a
    fast finish cannot hide the resume); re-running with --resume leaves the finished
    cells' files untouched and computes the rest; the table equals a clean run.
    The killed study's pool workers exit by themselves (they used to wait forever). The
    same with the user's data (a CSV file) and a scikit-learn estimator baseline."""
    out = tmp_path / "res"
    data, methods = "diabetes:n_train=80", "rvm/evidence,svm,rvm/evidence-mackay"
    if user:
        from sklearn.datasets import load_diabetes

        X, y = load_diabetes(return_X_y=True, as_frame=True)
        X.assign(target=y).to_csv(tmp_path / "mine.csv", index=False)
        data = f"{tmp_path / 'mine.csv'}:target=target:n_train=80"
        methods = "rvm/evidence,svm,sklearn=sklearn.ensemble.RandomForestRegressor:" \
            "n_estimators=30"
    args = ["--data", data, "--methods", methods, "--splits", "6", "--out", str(out),
            "--n-jobs", "2", "--no-progress", "--no-report"]
    cmd = [sys.executable, "-m", "sparsebayes.inference.cli", "study", *args]
    tag = uuid.uuid4().hex
    marker = f"SPARSEBAYES_TEST_STUDY={tag}"
    env = {**os.environ, "SPARSEBAYES_TEST_STUDY": tag}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(out.glob("cells/*/*/*.json"))) < 3:
        time.sleep(0.02)
    assert len(_processes_with(marker)) >= 2  # the study and its workers (n_jobs = cores)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 20
    while _processes_with(marker) and time.time() < deadline:
        time.sleep(0.1)
    assert not _processes_with(marker), "orphaned study workers"
    files = sorted(out.glob("cells/*/*/*.json"), key=lambda p: p.stat().st_mtime_ns)
    assert len(files) >= 3
    for p in files[9:]:  # a loaded machine may finish every cell before the kill lands
        p.unlink()
    done = {p: p.stat().st_mtime_ns for p in files[:9]}
    assert main(["study", *args, "--resume"]) == 0
    after = list(out.glob("cells/*/*/*.json"))
    assert len(after) == 18
    assert all(p.stat().st_mtime_ns == m for p, m in done.items())
    clean = st.run_study(data, methods, 6, progress=False)
    same_table(st.load_table(out), clean)


@pytest.mark.slow
def test_local_processes_equal_in_process(tiny_table, same_table):
    same_table(st.run_study(DATA, METHODS, 2, n_jobs=2, progress=False), tiny_table)


def test_unreachable_scheduler_fails_fast(tmp_path):
    start = time.perf_counter()
    with pytest.raises(ConnectionError, match="could not reach the Dask scheduler"):
        st.run_study(DATA, "svm", 1, tmp_path / "x", scheduler="tcp://127.0.0.1:9",
                     timeout=2, progress=False)
    assert time.perf_counter() - start < 15
    assert not (tmp_path / "x").exists()  # nothing written
    with pytest.raises(ValueError, match="scheduler must be an address"):
        st.run_study(DATA, "svm", 1, scheduler="localhost", progress=False)


@pytest.mark.slow
def test_dask_local_cluster_equals_local_run(tiny_table, tmp_path, same_table):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        table = st.run_study(DATA, METHODS, 2, tmp_path / "d", scheduler=cluster.scheduler_address,
                             progress=False)
        with distributed.Client(cluster) as client:  # a Client object works too
            table2 = st.run_study(DATA, METHODS, 2, scheduler=client, progress=False)
    same_table(table, tiny_table)
    same_table(table2, tiny_table)



def test_batches_keep_a_sampled_method_on_a_data_set_in_one_worker():
    """Local processes get one batch per (data set, sampled method), its splits in order,
    so a worker compiles each PyMC model once for all its splits; the other methods' cells
    come one by one, the first split of each early (with the batches, costliest methods
    first), the rest after them (split by split), so the short cells fill the end."""
    from sparsebayes.inference.study.executors import batches, cost_rank
    from sparsebayes.inference.study.run import config

    cfg = config("sinc:n_train=30,diabetes:n_train=40",
                    "svm,rvm/evidence,gp/evidence,rvm/nuts:draws=10:tune=10", 3, 0)
    cells, _ = cfg.cells(None, 0, 1)
    groups = batches(list(reversed(cells)))
    assert sorted((c.key["split"], c.data.label, c.method.label) for b in groups for c in b) \
        == sorted((c.key["split"], c.data.label, c.method.label) for c in cells)
    assert sum(map(len, groups)) == len(cells)
    for b in groups:
        assert len({(c.data.label, c.method.label) for c in b}) == 1
        assert [c.split for c in b] == sorted(c.split for c in b)
        assert len(b) == (3 if b[0].method.method == "nuts" else 1)
    head, tail = groups[:2 * 4], groups[2 * 4:]
    assert all(b[0].split == 0 for b in head) and all(b[0].split > 0 for b in tail)
    ranks = [cost_rank(b[0])[0] for b in head]
    assert ranks == sorted(ranks) and head[0][0].method.method == "nuts"
    # the GP's exact leave-one-out refits put it before the RVM's warm ones and the SVM
    assert [b[0].method.family for b in head][2:4] == ["gp", "gp"]
    assert [cost_rank(b[0]) for b in tail] == sorted(cost_rank(b[0]) for b in tail)


def test_time_left_is_the_work_left_not_the_first_cells_rate(capsys):
    """The first time left shown by the default study was 4:20:02 for a 5-minute run:
    tqdm extrapolated the first (NUTS, costliest-first) cell's rate over all 260 cells.
    Replayed on the default study's cells with their measured seconds per cell
    (benchmarks/results/default_study.md, 2 workers, compilations on each worker's first
    cell of a method, and of a NUTS data set): no estimate before a cell ends, then within
    a factor 1.6 of the true time left, while the count extrapolation was 28x over."""
    import heapq

    from sparsebayes.inference.study import DEFAULT_STUDY
    from sparsebayes.inference.study.executors import Progress, cost_rank
    from sparsebayes.inference.study.run import config

    seconds = {"nuts": (5.7, 4.05, 4.1, 5.5), "advi": (1.13, 0.6, 0.77, 0.66),
               "vrvm": (1.06, 0.11, 2.48, 0.48), "gp": (0.32, 0.95, 3.4, 3.49),
               "evidence": (2.2, 0.1, 4.05, 0.13), "rvm*": (0.05,) * 4,
               "svm": (0.12, 0.06, 0.19, 0.07)}  # per data set, compilation apart
    compile_ = {"nuts": 11.0, "advi": 23.0, "vrvm": 10.0, "evidence": 2.7}
    cfg = config(DEFAULT_STUDY["data"], DEFAULT_STUDY["methods"], 10, 0)
    cells = sorted(cfg.cells()[0], key=cost_rank)
    labels = [d.label for d in cfg.data]

    def kind(c):
        return c.method.family if c.method.family in ("gp", "rvm*", "svm") else \
            c.method.method

    free, events, compiled = [(15.0, 0), (15.0, 1)], [], set()  # 15 s of start-up
    for c in cells:
        t, worker = heapq.heappop(free)
        key = (worker, c.method.label, c.data.label if kind(c) == "nuts" else "")
        comp = 0.0 if key in compiled else compile_.get(kind(c), 0.2)
        compiled.add(key)
        s = seconds[kind(c)][labels.index(c.data.label)] + comp
        heapq.heappush(free, (t + s, worker))
        events.append((t + s, c, s, comp))
    events.sort(key=lambda e: e[0])
    end = events[-1][0]
    now = [0.0]
    bar = Progress(len(cells), 0, 0, 2, True, cells, clock=lambda: now[0])
    assert bar.seconds_left() is None and "left" not in capsys.readouterr().err
    for i, (t, c, s, comp) in enumerate(events[:-1]):
        now[0] = t
        bar.update({"dataset": c.data.label, "method": c.method.label, "split": c.split,
                    "status": "ok", "cell_seconds": s, "compile_seconds": comp})
        truth, left = end - t, bar.seconds_left()
        assert truth / 1.6 - 5 <= left <= 1.6 * truth + 5, (i, c.method.label, left, truth)
        if i == 0:
            assert t / 1 * (len(cells) - 1) > 20 * truth  # what tqdm showed: hours
            bar.refresh()
            shown = capsys.readouterr().err.rpartition("left ~")[2][:5]
            assert shown.startswith(("03:", "04:", "05:")), shown  # truth 04:38
    bar.close()


def test_a_cell_past_its_estimate_says_so_and_the_bar_ticks_while_it_runs(capsys,
                                                                          monkeypatch):
    """KIN40K's Student-t cell ran 20 min under "left ~00:00", and with one worker the bar
    stood still at [00:00] until a cell ended: the time past the estimate is shown as such,
    and the bar refreshes while a cell runs in this process."""
    from sparsebayes.inference.study import executors
    from sparsebayes.inference.study.run import config

    cells = config(["sinc"], ["rvm/evidence"], 3, 0).cells()[0]
    now = [0.0]
    bar = executors.Progress(len(cells), 0, 0, 1, True, cells, clock=lambda: now[0])
    c = cells[0]
    bar.update({"dataset": c.data.label, "method": c.method.label, "split": c.split,
                "status": "ok", "cell_seconds": 10.0})
    now[0] = 20.0 + 75.0  # two 10-s cells were due by t = 20
    bar.refresh()
    shown = capsys.readouterr().err
    assert "01:15 over the estimate" in shown and "left ~00:00" not in shown

    refreshed = []
    monkeypatch.setattr(bar, "refresh", lambda: refreshed.append(time.monotonic()))

    def slow_cell(cell):
        time.sleep(1.6)
        return {**cell.key, "status": "ok", "cell_seconds": 1.6}

    monkeypatch.setattr(executors, "run_cell", slow_cell)
    executors.execute(cells[1:2], 1, None, lambda cell, rec: None, bar)
    assert len(refreshed) >= 1
    bar.close()
