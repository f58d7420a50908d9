# Two commands for a fresh machine: `make study` (the main job) and `make test`.
# Both create or reuse a Python 3.12 virtual environment in .venv (python3 resolves to 3.12
# inside this repo through .python-version / pyenv; override with `make PYTHON=python3.12`).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 12), "sparsebayes needs Python >= 3.12, got " + sys.version'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

.PHONY: install study demo test lint docs bench bench-posteriors
install: $(VENV)/.installed

# The default comparison study on built-in data (no network); --resume makes a re-run
# finish an interrupted study instead of refusing the existing folder.
study: $(VENV)/.installed
	$(BIN)/sparsebayes study --out results/study --resume

demo: $(VENV)/.installed
	$(BIN)/sparsebayes demo --out results

lint: $(VENV)/.installed
	$(BIN)/ruff check .

# The documentation site (Sphinx + MyST + numpydoc; offline) with warnings as errors; it
# executes the notebooks at small size (cached in docs/_build until they change).
$(VENV)/.docs-installed: $(VENV)/.installed pyproject.toml
	$(BIN)/python -m pip install -q -e ".[docs]"
	touch $@

# `make test` re-executes every notebook (no cache) and marks the executed copies
# (docs/_build/jupyter_execute/.forced), which tests/test_notebooks.py then checks instead of
# executing the notebooks a second time; a cached `make docs` removes the mark.
docs: $(VENV)/.docs-installed
	$(BIN)/sphinx-build -W --keep-going -b html docs docs/_build/html $(SPHINXOPTS)
	$(if $(findstring nb_execution_mode=force,$(SPHINXOPTS)),touch,rm -f) docs/_build/jupyter_execute/.forced

# The docs build (one process) runs beside pytest's two workers, its log in docs/_build/docs.log
# (shown if it fails); tests/test_notebooks.py executes a notebook itself where the build has
# not yet marked its executed copy.
test: $(VENV)/.installed $(VENV)/.docs-installed lint
	@mkdir -p docs/_build/jupyter_execute && rm -f docs/_build/jupyter_execute/.forced
	@echo "building the docs beside the tests (log: docs/_build/docs.log)"
	@OPENBLAS_NUM_THREADS=1 $(MAKE) --no-print-directory docs \
		SPHINXOPTS="-D nb_execution_mode=force" > docs/_build/docs.log 2>&1 & docs=$$!; \
	MPLBACKEND=Agg OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q \
		--durations=25 -n 2 --dist loadfile; tests=$$?; \
	wait $$docs; built=$$?; \
	if [ $$built -ne 0 ]; then tail -n 60 docs/_build/docs.log; \
		echo "the docs build failed: docs/_build/docs.log"; \
	else echo "docs built: docs/_build/html/index.html"; fi; \
	[ $$tests -eq 0 ] && [ $$built -eq 0 ]

bench: $(VENV)/.installed
	$(BIN)/python -m pip install -q -e ".[bench]"
	$(BIN)/python benchmarks/bench_regression.py
	OPENBLAS_NUM_THREADS=1 $(BIN)/python benchmarks/bench_classification.py

# The sampling benchmarks (PyMC; minutes each, the first compile ~40 s).
bench-posteriors: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_nuts.py
	$(BIN)/python benchmarks/bench_nuts_classification.py
	$(BIN)/python benchmarks/bench_predictive.py
