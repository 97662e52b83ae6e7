# Two commands set everything up: `make lab` opens the lab, `make test` runs the tests.
# Both create .venv on first use and reuse it afterwards.

VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
# Without an NVIDIA GPU, install a CPU build of torch first so pip never pulls the
# multi-GB CUDA build; with one, leave the choice to pip (no cap). Override with
# `make TORCH=...` (empty to skip) and pass a package index with TORCH_INDEX=URL.
TORCH ?= $(shell command -v nvidia-smi >/dev/null 2>&1 || echo torch==2.13.0)
TORCH_INDEX ?=
ARGS ?=

.PHONY: lab test test-portable lint bench screenshots clean

# Two stamps: the lab's own dependencies, then the test extras on top (tests, lint, the
# transformers reference, playwright, tensorboard), which the lab never imports and which
# would double a newcomer's wait before the first frame. `make test` after `make lab` adds
# the extras to the same .venv; either stamp is redone when pyproject.toml changes.
LAB_STAMP := $(VENV)/.installed-lab
TEST_STAMP := $(VENV)/.installed-test

$(LAB_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	if [ -n "$(TORCH)" ] && ! $(PY) -c "import torch" 2>/dev/null; then \
		$(PY) -m pip install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH)"; fi
	$(PY) -m pip install -q -e .
	touch $@

$(TEST_STAMP): $(LAB_STAMP)
	$(PY) -m pip install -q -e '.[test]'
	touch $@

lab: $(LAB_STAMP)
	$(VENV)/bin/tfx-lab $(ARGS)

# The suite on one worker more than there are cores (pytest-xdist; JOBS=0 runs it in one
# process). A UI test spends a third of its time waiting for the lab to go idle after each
# key, a core left unused by a worker per core (2 cores: 84% busy); the extra worker fills
# it: 134-152 s with three workers against 162-178 s with two, for the same CPU seconds.
# Idle workers take tests from busy ones (worksteal): a module's shared run is trained at
# most once per worker, and no worker waits while another holds a long file.
# Bytecode is cached whatever PYTHONDONTWRITEBYTECODE says (some machines set it): each
# fresh interpreter the tests start (the command line, the fork server, serve's tabs) would
# otherwise compile the whole package again, a second of a core each time, and each worker
# would rewrite every test module's asserts.
JOBS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
DIST ?= worksteal
CACHED := env -u PYTHONDONTWRITEBYTECODE
test: $(TEST_STAMP)
	bash scripts/ensure_chromium.sh
	$(CACHED) $(PY) -m compileall -q tui_lab bench tests
	$(CACHED) $(PY) -m pytest -q -n $(JOBS) --dist $(DIST) $(ARGS)

# The UI and core tests with nothing set, then under settings that make this CPU round
# floats as another would (MKL's reproducible mode, AVX2 only, torch's plain kernels): a
# test or snapshot that hangs on float rounding fails here.
PORTABLE_TESTS ?= tests/ui tests/core
test-portable: $(TEST_STAMP)
	$(PY) -m pytest -q -n $(JOBS) --dist $(DIST) $(PORTABLE_TESTS) $(ARGS)
	MKL_CBWR=COMPATIBLE $(PY) -m pytest -q -n $(JOBS) --dist $(DIST) $(PORTABLE_TESTS) $(ARGS)
	MKL_ENABLE_INSTRUCTIONS=AVX2 $(PY) -m pytest -q -n $(JOBS) --dist $(DIST) $(PORTABLE_TESTS) $(ARGS)
	ATEN_CPU_CAPABILITY=default $(PY) -m pytest -q -n $(JOBS) --dist $(DIST) $(PORTABLE_TESTS) $(ARGS)

# ruff over the code; import-linter's contracts (pyproject.toml: core's layers, core free of
# textual/rich, ui below cli, the ui's layers, panes independent, no cycle); mypy over the
# whole package, core, ui and cli ([tool.mypy] there).
lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check tui_lab tests bench scripts
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# The benchmarks set the lab beside transformers' own models: the test extras.
bench: $(TEST_STAMP)
	$(PY) -m bench $(ARGS)

screenshots: $(LAB_STAMP)
	$(PY) scripts/screenshots.py

clean:
	rm -rf $(VENV) .pytest_cache
