"""Executors of a study's cells: this process (``n_jobs=1``), a pool of local processes
(``n_jobs > 1``, spawned, exiting with their parent; each worker takes all the splits of one
method on one data set, :func:`batches`, and hands each cell on as it ends) or a Dask cluster
(an address or a ``distributed.Client``). The order of the cells changes no number: each has
its own seed."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from ..families import REGISTERED
from ..methods import METHODS, method_of
from .cells import Cell, run_cell

__all__ = ["execute", "dask_client", "Progress"]


def dask_client(scheduler, timeout: float):
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - dask is a dev/optional dependency
        raise ImportError("a Dask scheduler needs 'distributed': pip install "
                          "'sparsebayes[dask]'") from exc
    if isinstance(scheduler, Client):
        return scheduler, False
    if not isinstance(scheduler, str) or not re.fullmatch(r"[a-z]+://[^\s]+", scheduler):
        raise ValueError(f"scheduler must be an address like 'tcp://host:8786' or a "
                         f"distributed.Client, got {scheduler!r}")
    try:
        client = Client(scheduler, timeout=f"{timeout}s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ConnectionError(f"could not reach the Dask scheduler at {scheduler} within "
                              f"{timeout:g} s ({type(exc).__name__}: {exc})") from None
    return client, True


# A cell's expected seconds of one core (fit, leave-one-out and prediction; compilation
# apart) before any cell of its method has finished: the default study's per-cell means
# (benchmarks/results/default_study.md), by fit method (``Method.prior_seconds``); "rvm*"
# has no LOO of its own, the scikit-learn baselines fit in a fraction of a second. Only the
# ratios matter: the study's own finished cells set the scale
# (:meth:`Progress.seconds_left`).
_PRIOR_FAMILY = {"rvm*": 0.05, "svm": 0.1, "sklearn": 0.1}


def prior_seconds(cell: Cell) -> float:
    """The relative cost of a cell before its method has run
    (:attr:`~sparsebayes.inference.methods.Method.prior_seconds`)."""
    family = cell.method.family
    if family in _PRIOR_FAMILY:
        return _PRIOR_FAMILY[family]
    return method_of(cell.method.method).prior_seconds


def _busy_seconds(record: dict[str, Any]) -> float | None:
    """A finished cell's seconds without its compilation (paid once per worker and
    method, not by the cells still to run), or None if the record has no time."""
    total = record.get("cell_seconds")
    if not isinstance(total, int | float) or not total == total:  # None or NaN
        return None
    compiled = record.get("compile_seconds")
    if isinstance(compiled, int | float) and compiled == compiled:
        total -= compiled
    return max(float(total), 0.0)


class Progress:
    """A tqdm bar with cells done / running / failed and the time left.

    The time left is not tqdm's cells-per-second extrapolation: a study runs its costliest
    cells first (NUTS before an SVM that takes 1/50 of the time), so the first cell's rate
    extrapolated over all cells was hours off (4:20:02 for a 5-minute study). It is the
    expected seconds of the cells still to run, over the ``slots`` that run them: a cell
    is expected to take the mean of the finished cells of its method on its data set, else
    of its method on the other data sets, else its :func:`prior_seconds` scaled by the
    finished cells' seconds per prior second; compilation apart, each method not run yet
    adding one compilation per worker as long as those so far. No estimate before the
    first cell ends (or a resumed study's stored cells give one). ``cells``: the cells to
    run; ``history``: the records of cells already done."""

    def __init__(self, total: int, done: int, failed: int, slots: int, enabled: bool,
                 cells=(), history=(), clock: Callable[[], float] = time.monotonic):
        from ..progress import progress_bar

        self.bar = progress_bar(total=total, initial=done, unit="cell", desc="study",
                        disable=not enabled, file=sys.stderr, dynamic_ncols=True,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                   "[{elapsed}{postfix}]")
        self.failed, self.slots, self.left = failed, slots, total - done
        self.told: set[tuple[str, str]] = set()  # (method, error) already printed
        self.clock = clock
        self.pending = {(c.data.label, c.method.label, c.split): prior_seconds(c)
                        for c in cells}
        self.prior = {c.method.label: prior_seconds(c) for c in cells}
        # methods that compile on a worker's first use (not the scikit-learn baselines, nor
        # rvm*, which runs the rvm kernels)
        self.compiling = {c.method.label for c in cells
                          if c.method.family not in _PRIOR_FAMILY}
        self.seconds: dict[tuple[str, str], list[float]] = {}  # (data set, method): times
        self.compiles: list[float] = []  # the compilations finished cells paid
        self.estimate: tuple[float, float] | None = None  # (seconds left, at clock time)
        for record in history:
            self._measure(record)
        self._estimate()
        self._post()

    def _measure(self, record: dict[str, Any]) -> None:
        key = (str(record.get("dataset")), str(record.get("method")), record.get("split"))
        self.pending.pop(key, None)
        seconds = _busy_seconds(record)
        if seconds is not None:
            self.seconds.setdefault(key[:2], []).append(seconds)
        compiled = record.get("compile_seconds")
        if isinstance(compiled, int | float) and compiled > 0:
            self.compiles.append(float(compiled))

    def seconds_left(self) -> float | None:
        """The expected wall seconds of the cells still to run, or None before any cell
        has a time (see the class)."""
        if not self.seconds:
            return None
        if not self.pending:
            return 0.0
        mean = {k: sum(v) / len(v) for k, v in self.seconds.items()}
        method: dict[str, list[float]] = {}
        for (_, m), v in self.seconds.items():
            method.setdefault(m, []).extend(v)
        known = [k for k in self.seconds if k[1] in self.prior]
        scale = (sum(sum(self.seconds[k]) for k in known)
                 / sum(self.prior[k[1]] * len(self.seconds[k]) for k in known)) if known \
            else sum(map(sum, self.seconds.values())) / sum(map(len, self.seconds.values()))
        # each method not run yet compiles once in each worker that takes it, as long as
        # the compilations so far took
        new = {m for _, m, _ in self.pending if m in self.compiling} - set(method)
        work = (len(new) * self.slots * sum(self.compiles) / len(self.compiles)
                if self.compiles else 0.0)
        for (d, m, _), prior in self.pending.items():
            if (d, m) in mean:
                work += mean[(d, m)]
            elif m in method:
                work += sum(method[m]) / len(method[m])
            else:
                work += prior * scale
        return work / max(1, min(self.slots, len(self.pending)))

    def _estimate(self) -> None:
        left = self.seconds_left()
        self.estimate = None if left is None else (left, self.clock())

    def _post(self) -> None:
        post = f"running={min(self.slots, self.left)}, failed={self.failed}"
        if self.estimate is not None and self.left:
            from tqdm import tqdm

            left = self.estimate[0] - (self.clock() - self.estimate[1])
            post += (f", left ~{tqdm.format_interval(left)}" if left >= 0 else
                     f", {tqdm.format_interval(-left)} over the estimate")
        self.bar.set_postfix_str(post, refresh=False)

    def update(self, record: dict[str, Any]) -> None:
        self.left -= 1
        self._measure(record)
        self._estimate()
        if record.get("status") != "ok":
            self.failed += 1
            said = (str(record.get("method")), str(record.get("error", "")))
            if not self.bar.disable and said not in self.told:  # say why once, and go on
                from .report import whole_sentences

                self.told.add(said)
                self.bar.write(f"failed: {record.get('dataset')} split {record.get('split')} "
                               f"{said[0]}: {whole_sentences(said[1])} (the study goes on; "
                               "later cells failing alike are not repeated)", file=sys.stderr)
        self._post()
        self.bar.update(1)

    def refresh(self) -> None:
        self._post()  # the time left counts down between cells
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


_RESULTS = None  # a worker's queue of finished cells (set by _init_worker)


def _init_worker(parent: int, results=None) -> None:
    global _RESULTS
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import threading

    _RESULTS = results
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()


def run_batch(batch: int, cells: list[Cell]) -> None:
    """Run ``cells`` one after the other in this worker, putting ``(batch, position,
    record)`` on the pool's queue as each finishes (so the study saves and counts every
    cell as it ends, not when the batch does)."""
    for j, cell in enumerate(cells):
        _RESULTS.put((batch, j, run_cell(cell)))


def batches(todo: list[Cell]) -> list[list[Cell]]:
    """The units of work of local worker processes, in the order they are handed out.
    A sampled method (NUTS, ADVI) compiles its PyMC model once per process: its cells on
    one data set form one batch, in split order, for one worker. The other methods' compiled
    kernels are cached on disk (numba), so their cells go one by one: the first split of
    each (data set, method) with the batches (it writes the cache), the rest after them,
    where the short cells keep every worker busy to the end. Costliest methods first
    (:func:`cost_rank`)."""
    groups: dict[tuple[str, str], list[Cell]] = {}
    for cell in sorted(todo, key=lambda c: c.split):
        groups.setdefault((cell.data.label, cell.method.label), []).append(cell)
    head, tail = [], []
    for cells in groups.values():
        method = METHODS.get(cells[0].method.method)  # None for a baseline
        if method is not None and method.draws:
            head.append(cells)
        else:
            head.append(cells[:1])
            tail.extend([c] for c in cells[1:])
    return (sorted(head, key=lambda b: (cost_rank(b[0])[0], -len(b)))
            + sorted(tail, key=lambda b: cost_rank(b[0])))


def _exit_with_parent(parent: int, every: float = 0.5) -> None:
    """A pool worker whose parent was killed (SIGKILL, the OOM killer) would wait for work
    forever, holding its memory; it exits once it has been re-parented."""
    while os.getppid() == parent:
        time.sleep(every)
    os._exit(1)


@contextlib.contextmanager
def _ticking(progress: Progress, every: float = 1.0):
    """Refresh the bar every ``every`` seconds from a thread while this process waits on a
    cell (run here, or on Dask), so its elapsed time and time left count on."""
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(every):
            progress.refresh()

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def execute(todo: list[Cell], n_jobs: int, client,
            on_result: Callable[[Cell, dict], None], progress: Progress) -> None:
    if client is not None or n_jobs == 1:
        with _ticking(progress):
            _execute_here_or_on_dask(todo, client, on_result, progress)
        return
    _execute_on_processes(todo, n_jobs, on_result, progress)


def _execute_here_or_on_dask(todo, client, on_result, progress) -> None:
    if client is None:
        for cell in todo:
            rec = run_cell(cell)
            on_result(cell, rec)
            progress.update(rec)
        return
    from distributed import as_completed

    futures = {client.submit(run_cell, c, pure=False): c for c in todo}
    try:
        for fut in as_completed(futures, loop=client.loop):
            cell = futures[fut]
            try:
                rec = fut.result()
            except Exception as exc:  # the worker died (KilledWorker) and the like
                rec = {**cell.key, "task": cell.data.info.task, "status": "failed",
                       "error": f"{type(exc).__name__}: {exc}"}
            on_result(cell, rec)
            progress.update(rec)
    finally:
        client.cancel(list(futures))


def _execute_on_processes(todo, n_jobs, on_result, progress) -> None:
    import multiprocessing
    import queue
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    ctx = multiprocessing.get_context("spawn")  # fork after BLAS/numba threads is unsafe
    results = ctx.Queue()
    pool = ProcessPoolExecutor(max_workers=n_jobs, mp_context=ctx, initializer=_init_worker,
                               initargs=(os.getpid(), results))
    groups = batches(todo)
    left = [len(todo)]

    def drain(timeout: float | None = None) -> None:
        """Hand on every finished cell (waiting up to ``timeout`` s for the first)."""
        while left[0]:
            try:
                b, j, rec = results.get(timeout=timeout) if timeout else results.get_nowait()
            except queue.Empty:
                return
            timeout = None
            left[0] -= 1
            on_result(groups[b][j], rec)
            progress.update(rec)

    finished = False
    try:
        pending = {pool.submit(run_batch, b, cells) for b, cells in enumerate(groups)}
        while pending:
            done, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            drain()
            if not done:  # long cells: keep the elapsed time ticking
                progress.refresh()
            for fut in done:
                try:
                    fut.result()
                except BrokenProcessPool as exc:
                    raise RuntimeError("a worker process died (out of memory?); the "
                                       "finished cells are saved: re-run with --resume"
                                       ) from exc
        while left[0]:  # records still in the queue's pipe when their batch ended
            before = left[0]
            drain(timeout=60.0)
            if left[0] == before:
                raise RuntimeError(f"{left[0]} finished cells never reached the study; "
                                   "re-run with --resume")
        finished = True
    finally:
        # after the last cell the idle workers wind down (interpreter teardown with PyMC and
        # numba loaded) while the study writes its table and report; on an error, wait
        pool.shutdown(wait=not finished, cancel_futures=True)


def cost_rank(cell: Cell) -> tuple[int, int]:
    """Expensive cells first (a longest-first order keeps every worker busy to the end; the
    families' :attr:`~sparsebayes.inference.family.Family.schedule_rank`), and within a cost
    the data sets interleaved split by split (the order of cells in this process and on
    Dask; local processes take whole :func:`batches`). The order changes no number: every
    cell has its own seed."""
    method = cell.method
    rank = min((f.rank(method.method) for f in REGISTERED
                if f.study_name == method.family), default=3)
    return rank, cell.split


def dask_slots(client) -> int:
    try:
        return max(1, int(sum(client.nthreads().values())))
    except Exception:  # an informational number only
        return 1


