# Two commands do all set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# PySCF and PyTorch each start a thread per core; pin them so they do not fight.
export OMP_NUM_THREADS ?= 2
export MKL_NUM_THREADS ?= 2
export OPENBLAS_NUM_THREADS ?= 2
# Idle OpenMP threads sleep instead of spinning: with another job on a core, spinning made a
# 0.06 s training step take 1 s.
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: setup run test bench clean

setup: $(STAMP)

# torch==2.13.0 first (a CPU build lies on disk); the project's torch>=2.3 is
# then already satisfied, so pip never pulls a CUDA build.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

run: setup
	$(BIN)/nnqs vmc LiH --out runs/LiH --overwrite

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV) runs *.egg-info
