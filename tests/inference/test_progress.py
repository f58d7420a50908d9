"""Progress of long fits as logging records (logger "sparsebayes"): a NUTS fit run from a
subprocess whose output goes to a pipe (no terminal, so no bar) says what it does, its size,
how far it is and how long it took, announces compilation, and the logging level silences it
all."""

import logging
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from sparsebayes.inference import progress

SCRIPT = textwrap.dedent("""
    import logging
    from sparsebayes.inference import fit
    from sparsebayes.models import GaussianKernel, RVMRegression, datasets

    X, t = datasets.sinc(20, noise="gaussian", noise_scale=0.1, seed=0)
    problem = RVMRegression(X, t, kernel=GaussianKernel(width=3.0))
    opts = dict(draws=30, tune=30, chains=1, cores=1, sampler="nutpie", warn=False, seed=1)
    fit(problem, "nuts", **opts)
    print("SILENCED FROM HERE", flush=True)
    logging.getLogger("sparsebayes").setLevel(logging.WARNING)
    fit(problem, "nuts", **opts)
""")


@pytest.fixture(scope="module")
def nuts_output() -> str:
    """stderr of :data:`SCRIPT` run with its output to pipes (no terminal, CI set: no bar)."""
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         timeout=900, env={**os.environ, "CI": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "SILENCED FROM HERE" in run.stdout
    return run.stderr


@pytest.mark.slow
def test_nuts_subprocess_logs_start_size_end_time_and_compilation(nuts_output):
    err = nuts_output
    lines = err.splitlines()
    start = [x for x in lines if x == "nuts fit of RVMRegression, N=20, M=21: started"]
    end = [x for x in lines if re.fullmatch(
        r"nuts fit of RVMRegression, N=20, M=21: done in \d+\.\d s", x)]
    compiling = [x for x in lines if re.match(r"compiling .*\(once per install/process\)", x)]
    compiled = [x for x in lines if re.fullmatch(r"compiled .* in \d+\.\d s", x)]
    progress_lines = [x for x in lines if re.fullmatch(
        r"nuts: \d+% \(\d+ of 60 draws, \d+ divergences\), \d+ s, about \d+ s left", x)]
    # one fit logged (the second is silenced), compilation announced once with its time,
    # and the sampler's progress up to 100% (60 = 30 tune + 30 draws, one chain)
    assert len(start) == 1 and len(end) == 1, err
    assert len(compiling) == 1 and len(compiled) == 1, err
    assert progress_lines and progress_lines[-1].startswith("nuts: 100% (60 of 60"), err
    assert lines.index(start[0]) < lines.index(compiling[0]) < lines.index(end[0])


@pytest.mark.slow
def test_logging_level_silences_the_fit_lines(nuts_output):
    err = nuts_output
    # the second fit ran at level WARNING: no second start, end or progress line
    assert err.count(": started") == 1, err
    assert err.count(": done in") == 1, err
    assert err.count("nuts: 100%") == 1, err


def test_sampler_callback_logs_each_tenth_once(caplog):
    class Chain:
        def __init__(self, done):
            self.finished_draws, self.divergences = done, 1

    cb = progress.sampler_callback("nuts", total=50, chains=2)
    with caplog.at_level(logging.INFO, logger="sparsebayes"):
        for done in (0, 4, 5, 5, 12, 50):
            cb([Chain(done), Chain(done)])
    msgs = [re.sub(r", \d+ s, about \d+ s left$", "", r.getMessage()) for r in caplog.records]
    assert msgs == ["nuts: 10% (10 of 100 draws, 2 divergences)",
                    "nuts: 20% (24 of 100 draws, 2 divergences)",
                    "nuts: 100% (100 of 100 draws, 2 divergences)"]
    assert all(re.search(r", \d+ s, about \d+ s left$", r.getMessage()) for r in caplog.records)


def test_fit_logged_levels_and_quiet(caplog):
    """Small fits log at DEBUG, the long methods and large fits at INFO; ``quiet`` raises a
    level inside and restores it after."""
    class Problem:
        def __init__(self):
            self.X = np.zeros((7, 1))

    with caplog.at_level(logging.DEBUG, logger="sparsebayes"):
        with progress.fit_logged("evidence", Problem()):
            pass
        with progress.fit_logged("advi", Problem()):
            pass
        big = Problem()
        big.X = np.zeros((progress.LONG_N, 1))
        with progress.fit_logged("evidence", big):
            pass
    levels = [(r.levelno, r.getMessage().split(":")[0]) for r in caplog.records]
    assert levels == [(logging.DEBUG, "evidence fit of Problem, N=7")] * 2 + \
        [(logging.INFO, "advi fit of Problem, N=7")] * 2 + \
        [(logging.INFO, f"evidence fit of Problem, N={progress.LONG_N}")] * 2
    log = logging.getLogger("sparsebayes")
    before = log.level
    with progress.quiet("sparsebayes"):
        assert log.getEffectiveLevel() >= logging.WARNING
    assert log.level == before
