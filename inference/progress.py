"""What a long fit says while it runs, in one place: a start line (method and size) and an
end line (time) as :mod:`logging` records of the logger ``"sparsebayes"``, periodic progress
lines from the samplers when no progress bar is shown, and compilation announced once per
process ("compiling ... (once per install/process)" and the time it took).

In a terminal or a notebook the samplers show their own bars (``tqdm.auto`` style, see
:func:`~sparsebayes.inference.numerics.show_progress`); the log records are there in every
case. As PyMC does for its logger, the records are printed to stderr when the program has
configured no logging itself; ``logging.getLogger("sparsebayes").setLevel(logging.WARNING)``
silences them.
"""

from __future__ import annotations

import contextlib
import logging
import time

from .methods import method_of

__all__ = ["logger", "fit_logged", "compiling", "sampler_callback", "Evaluations", "quiet",
           "describe", "progress_bar",
           "LONG_N", "LONG_SECONDS"]

logger = logging.getLogger("sparsebayes")
if not logging.root.handlers and not logger.handlers:  # PyMC's default for its own logger
    logger.setLevel(logging.INFO)
    logger.addHandler(logging.StreamHandler())

# A fit that always takes seconds or more logs its start line at INFO: a method whose result
# holds draws (``Method.draws``), any fit on LONG_N points or more, one that learns widths
LONG_N = 1000
LONG_SECONDS = 5.0  # any other fit that took longer logs its end line at INFO
STEPS = 10  # progress lines per sampling run when no bar is shown

_STATE = {"announced": False, "explicit": 0}  # numba compilation announced; inside compiling()


def progress_bar(**kwargs):
    """A ``tqdm`` bar: the notebook widget where ipywidgets is installed, else the text bar
    (which notebooks show too), so that a notebook without ipywidgets gets a bar and not
    ``tqdm.auto``'s "IProgress not found" warning."""
    import importlib.util

    if importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm
    else:
        from tqdm.std import tqdm
    return tqdm(**kwargs)


def describe(problem) -> str:
    """``"RVMRegression, N=100, M=101"``: the problem's class and size."""
    size = f"N={problem.X.shape[0]}" if hasattr(problem, "X") else ""
    basis = getattr(problem, "basis", None)
    if basis is not None and hasattr(basis, "n_columns"):
        size += f", M={basis.n_columns}"
    return f"{type(problem).__name__}, {size}" if size else type(problem).__name__


class _NumbaCompiles:
    """Listener of numba's ``"numba:compile"`` events (fired on a real compilation, not on a
    load from numba's on-disk cache): announces the first one of the process and sums the
    time of the outermost ones."""

    def __init__(self) -> None:
        self.depth = 0
        self.start = 0.0
        self.seconds = 0.0

    def on_start(self, event) -> None:
        if self.depth == 0:
            self.start = time.perf_counter()
            if not _STATE["announced"] and not _STATE["explicit"]:
                _STATE["announced"] = True
                logger.info("compiling numba kernels (once per install/process: later "
                            "processes load them from numba's cache)")
        self.depth += 1

    def on_end(self, event) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.seconds += time.perf_counter() - self.start


def _listener():
    """A :class:`_NumbaCompiles` installed as a numba listener (a no-op without numba)."""
    try:
        from numba.core import event
    except ImportError:  # pragma: no cover - numba is a dependency
        return contextlib.nullcontext(None)
    watch = _NumbaCompiles()
    listener = type("Listener", (event.Listener,), {
        "on_start": lambda self, ev: watch.on_start(ev),
        "on_end": lambda self, ev: watch.on_end(ev)})()
    return _installed(event, listener, watch)


@contextlib.contextmanager
def _installed(event, listener, watch):
    with event.install_listener("numba:compile", listener):
        yield watch


@contextlib.contextmanager
def fit_logged(method: str, problem):
    """Log the start of ``fit(problem, method)`` with its size and its end with the time
    (INFO for a method whose result holds draws, :data:`LONG_N` points or more, learned
    widths, and for an end after :data:`LONG_SECONDS`; DEBUG otherwise), and the time
    numba spent compiling during it."""
    what = f"{method} fit of {describe(problem)}"
    X = getattr(problem, "X", None)
    long = (method_of(method).draws or bool(getattr(problem, "learn_width", False))
            or (X is not None and X.shape[0] >= LONG_N))
    logger.log(logging.INFO if long else logging.DEBUG, "%s: started", what)
    start = time.perf_counter()
    with _listener() as watch:
        yield
    elapsed = time.perf_counter() - start
    if watch is not None and watch.seconds > 0:
        logger.info("numba compiled for %.1f s during this fit (once per install/process)",
                    watch.seconds)
    level = logging.INFO if long or elapsed > LONG_SECONDS else logging.DEBUG
    logger.log(level, "%s: done in %.1f s", what, elapsed)


@contextlib.contextmanager
def compiling(what: str):
    """Announce the compilation of ``what`` ("compiling ... (once per install/process)")
    and log the time it took; numba's own announcement stays quiet inside."""
    logger.info("compiling %s (once per install/process) ...", what)
    start = time.perf_counter()
    _STATE["explicit"] += 1
    _STATE["announced"] = True  # numba's lazy pieces of it follow: no second announcement
    try:
        yield
    finally:
        _STATE["explicit"] -= 1
    logger.info("compiled %s in %.1f s", what, time.perf_counter() - start)


def sampler_callback(what: str, total: int, chains: int):
    """A nutpie ``progress_callback`` (one list of per-chain progress per call) that logs
    ``what: 40% (3200 of 8000 draws, 0 divergences), 12 s, about 18 s left`` at every tenth
    of ``total`` draws per chain x ``chains``; thread-safe enough for nutpie's background
    thread (one int)."""
    done_steps = {"n": 0}
    grand = total * chains
    start = time.perf_counter()

    def callback(progress) -> None:
        finished = sum(int(p.finished_draws) for p in progress)
        step = min(STEPS, finished * STEPS // max(grand, 1))
        if step > done_steps["n"]:
            done_steps["n"] = step
            divergences = sum(int(p.divergences) for p in progress)
            elapsed = time.perf_counter() - start
            left = elapsed * (grand - finished) / max(finished, 1)
            logger.info("%s: %d%% (%d of %d draws, %d divergences), %.0f s, about %.0f s left",
                        what, 100 * step // STEPS, finished, grand, divergences, elapsed, left)

    return callback


class Evaluations:
    """Progress of an optimiser's objective evaluations, for fits with no bar: after the
    first, when ``expected`` evaluations of that duration would pass :data:`LONG_SECONDS`,
    an INFO line with the estimate; then a line every ``every`` evaluations once the fit has
    run that long."""

    def __init__(self, what: str, expected: int, every: int = 20) -> None:
        self.what, self.expected, self.every = what, int(expected), int(every)
        self.count, self.start = 0, time.perf_counter()

    def update(self, value: float) -> None:
        self.count += 1
        elapsed = time.perf_counter() - self.start
        if self.count == 1 and elapsed * self.expected > LONG_SECONDS:
            logger.info("%s: the first evaluation took %.1f s; typically %d evaluations: "
                        "expect roughly %.0f s", self.what, elapsed, self.expected,
                        elapsed * self.expected)
        elif self.count % self.every == 0 and elapsed > LONG_SECONDS:
            logger.info("%s: %d evaluations in %.0f s (objective %.6g)", self.what,
                        self.count, elapsed, value)


@contextlib.contextmanager
def quiet(*names: str, level: int = logging.WARNING):
    """Raise the loggers ``names`` to at least ``level`` inside (e.g. under a study's
    progress bar, whose lines INFO records would break)."""
    logs = [logging.getLogger(n) for n in names]
    before = [log.level for log in logs]
    for log, old in zip(logs, before, strict=True):
        log.setLevel(max(old, level))
    try:
        yield
    finally:
        for log, old in zip(logs, before, strict=True):
            log.setLevel(old)
