# mythloop: one-command setup, tests, demo and benchmarks.
# Every target is idempotent: a second `make test` reinstalls nothing.

SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
APT_PACKAGES := libcairo2-dev libpango1.0-dev pkg-config ffmpeg texlive-latex-base \
                texlive-latex-extra dvisvgm chromium postgresql espeak-ng bubblewrap libseccomp2
# chromium: the UI check of the film run page; postgresql: the scale-out test and demo;
# espeak-ng: the films' offline voice-over (--voice espeak); bubblewrap, libseccomp2: the
# render sandbox (its allowlisted view; the syscall filter, through pyseccomp).
# Keep everything this project writes inside the checkout.
export MYTHLOOP_STATE_DIR ?= $(CURDIR)/.mythloop
export PREFECT_HOME ?= $(MYTHLOOP_STATE_DIR)/prefect
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
PYTEST_ARGS ?=
# The suite runs on one worker per CPU (pytest-xdist), each test file whole on one worker (its
# module fixtures built once); each worker has its own state folder and Prefect test harness.
# TEST_WORKERS= runs it in one process.
TEST_WORKERS ?= -n auto --dist loadfile

.PHONY: setup apt venv test test-fast test-scale demo demo-sweep demo-film bench bench-scale bench-compare bench-page lint doctor clean

setup: apt $(VENV)/.installed

# System packages: installed only when one is missing (manimpango and pycairo
# build against cairo/pango; MathTex needs LaTeX + dvisvgm; manim needs ffmpeg).
apt:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "[setup] installing system packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "[setup] system packages present"; fi

# torch first, pinned to the local CPU wheel: otherwise sentence-transformers
# pulls a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e ".[dev]"
	@touch $@

# The whole suite, less the tests marked scale_long: `make scale-demo` runs the same steps
# (a worker killed mid-shard, ~4 min), `make test-scale` runs their tests.
test: setup
	$(VENV)/bin/pytest -q --durations=15 $(TEST_WORKERS) -m "not scale_long" $(PYTEST_ARGS)

.PHONY: test-scale
test-scale: setup
	$(VENV)/bin/pytest -q --durations=15 -m scale_long $(PYTEST_ARGS)

# The fast lane: the suite without the tests marked slow (renders video or starts servers) or
# wheel. `make test` (CI) still runs everything; docs/operations.md lists the slowest tests.
test-fast: setup
	$(VENV)/bin/pytest -q --durations=15 $(TEST_WORKERS) -m "not slow and not wheel" $(PYTEST_ARGS)

demo: setup demo-sweep demo-film

demo-sweep: setup
	$(VENV)/bin/mythloop sweep --judge simulated --noise 0.2 --rounds 6 --replicates 3

demo-film: setup
	$(VENV)/bin/mythloop film "the heat equation" --backend replay --render -q l

# Router, sweep, film, overhead, MetaTool, bad input (~25 min on 2 cores): records appended
# to bench/records/, then bench/RESULTS.md generated from them.
bench: setup
	$(PY) bench/run_all.py

# The scale part alone (PostgreSQL stack, 1 vs 2 workers, a 1000-task burst; ~6 min on a
# quiet machine): its records, then the page.
bench-scale: setup
	$(PY) bench/run_all.py --only scale

# bench/RESULTS.md from the records alone (no measurement).
bench-page:
	$(PY) bench/report.py

# Two selections of records (commits or run labels), figure by figure, with whether each
# difference is beyond the noise of the repeated runs:
#   make bench-compare A=8a9cb3e B=0d1cdeb     or     make bench-compare 8a9cb3e 0d1cdeb
ifeq (bench-compare,$(firstword $(MAKECMDGOALS)))
  COMPARE_ARGS := $(wordlist 2,$(words $(MAKECMDGOALS)),$(MAKECMDGOALS))
  $(eval $(COMPARE_ARGS):;@:)
endif
bench-compare:
	$(PY) bench/compare.py $(if $(A),"$(A)" "$(B)",$(COMPARE_ARGS))

# mypy sees flows/ and tasks/ under their installed names through links in .mypy-path/.
lint: setup
	$(VENV)/bin/ruff check mythloop mythloop_app flows tasks tests bench deployments setup.py
	$(VENV)/bin/lint-imports
	@mkdir -p .mypy-path && ln -sfn ../flows .mypy-path/mythloop_flows && ln -sfn ../tasks .mypy-path/mythloop_tasks
	MYPYPATH=.mypy-path $(VENV)/bin/mypy -p mythloop -p mythloop_app -p mythloop_flows -p mythloop_tasks

doctor: setup
	$(VENV)/bin/mythloop doctor

# The wheel on its own (tests/test_wheel.py, also part of `make test`): python -m build, twine
# check, a fresh venv outside the checkout (torch first, then the wheel), and from an empty
# folder `mythloop sweep`, `mythloop film` (stages only) and `mythloop doctor`.
.PHONY: wheel-check
wheel-check: setup
	$(VENV)/bin/pytest -q -m wheel tests/test_wheel.py $(PYTEST_ARGS)

clean:
	rm -rf .mythloop .pytest_cache .ruff_cache .mypy_cache .mypy-path

# Scale-out demo (docs/scaling.md): PostgreSQL from Debian's packages (installed when initdb
# is missing), a Prefect server on it, the `mythloop` process pool, two workers and a sharded
# sweep; everything it starts is stopped at the end.
.PHONY: scale-demo
scale-demo: setup
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || { \
	  echo "[scale-demo] installing postgresql"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends postgresql; }
	$(PY) -m mythloop_app.scale.demo
