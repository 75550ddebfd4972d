# The two commands a fresh machine needs (Python >= 3.10, the package index reachable):
#   make quickstart   install into .venv and run the main job on its embedded default
#   make test         install into .venv (with test extras) and run the test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_WORKERS ?= 2

.PHONY: quickstart test bench aot mutants faults clean

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

quickstart: $(VENV)/.installed
	$(PY) -m attnjax.quickstart

test: $(VENV)/.installed
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --maxschedchunk=1 --durations=15

# Benchmarks compare against torch, a benchmark-only extra: the CPU build (2.13.0 lies on this machine's disk).
bench: $(VENV)/.installed
	$(PY) -m pip install --quiet 'torch==2.13.0'
	$(PY) -m benchmarks.kernels

# Compile every experiment of the study for its default target (TPU topologies need libtpu, in the test extra) and
# write the cost table: per-device memory, fit, estimated step time and device-hours.
aot: $(VENV)/.installed
	JAX_PLATFORMS=cpu $(PY) -m attnjax.compile --all --out=docs/study_cost.md

# Mutation check (issue 12): one-line corruptions of the papers' equations (sqrt(d_model), sqrt(d_k), causal mask,
# Shaw's clipping, ConvS2S's sqrt(0.5), label smoothing, the rsqrt schedule, the GNMT penalty, ...) must each make
# their equation tests fail; each runs in a temporary copy of attnjax/ and tests/. A few minutes on 2 cores.
mutants: $(VENV)/.installed
	JAX_PLATFORMS=cpu $(PY) -m tools.mutation_check

# Fault injection (issue 15): 20 random faults on the 2-process gloo run (kill -9 of either or both processes, also
# during an asynchronous checkpoint write; SIGTERM to one; SIGSTOP of one; a full disk; a torn checkpoint; a flaky
# or failing bucket), each followed by a restart that must end bit-identical to an uninterrupted run. ~25 minutes on
# 2 cores; FAULTS_FLAGS=--quick runs the CI subset (tests/faults/test_faults.py).
faults: $(VENV)/.installed
	JAX_PLATFORMS=cpu $(PY) -m tools.faults --faults=20 $(FAULTS_FLAGS)

clean:
	rm -rf $(VENV) build *.egg-info
