"""Executors of a study's cells: this process (``n_jobs=1``), a pool of local processes
(``n_jobs > 1``, spawned, exiting with their parent; each worker takes all the splits of one
method on one data set, :func:`batches`, and hands each cell on as it ends) or a Dask cluster
(an address or a ``distributed.Client``). The order of the cells changes no number: each has
its own seed."""

from __future__ import annotations

import os
import re
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

from ..families import REGISTERED
from ..loo import SAMPLED_METHODS
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


class Progress:
    """A tqdm bar with cells done / running / failed and the time left."""

    def __init__(self, total: int, done: int, failed: int, slots: int, enabled: bool):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, initial=done, unit="cell", desc="study",
                        disable=not enabled, file=sys.stderr, dynamic_ncols=True)
        self.failed, self.slots, self.left = failed, slots, total - done
        self.told: set[tuple[str, str]] = set()  # (method, error) already printed
        self._post()

    def _post(self) -> None:
        self.bar.set_postfix(running=min(self.slots, self.left), failed=self.failed,
                             refresh=False)

    def update(self, record: dict[str, Any]) -> None:
        self.left -= 1
        if record.get("status") != "ok":
            self.failed += 1
            said = (str(record.get("method")), str(record.get("error", "")))
            if not self.bar.disable and said not in self.told:  # say why once, and go on
                self.told.add(said)
                self.bar.write(f"failed: {record.get('dataset')} split {record.get('split')} "
                               f"{said[0]}: {said[1][:300]} (the study goes on; later "
                               "cells failing alike are not repeated)", file=sys.stderr)
        self._post()
        self.bar.update(1)

    def refresh(self) -> None:
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
        if cells[0].method.method in SAMPLED_METHODS:
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


def execute(todo: list[Cell], n_jobs: int, client,
             on_result: Callable[[Cell, dict], None], progress: Progress) -> None:
    if client is not None:
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
        return
    if n_jobs == 1:
        for cell in todo:
            rec = run_cell(cell)
            on_result(cell, rec)
            progress.update(rec)
        return
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
    rank = min((f.schedule_rank.get(method.method, 3) for f in REGISTERED
                if f.study_name == method.family), default=3)
    return rank, cell.split


def dask_slots(client) -> int:
    try:
        return max(1, int(sum(client.nthreads().values())))
    except Exception:  # an informational number only
        return 1


