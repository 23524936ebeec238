# The README's two quick-start commands. Each sets itself up on a fresh machine.
#   make test   - install with test extras and run the whole test suite (a worker per core)
#   make bench  - the main job: convgemm vs cuDNN (or an interpreter correctness demo without a GPU)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Without a GPU the kernels run under Triton's interpreter; pin what it is known to work with.
HAS_CUDA := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1 || echo 0)
ifeq ($(HAS_CUDA),1)
PINS :=
# use the machine's CUDA build of torch instead of downloading another
VENV_FLAGS := --system-site-packages
else
PINS := torch==2.13.0 triton==3.6.0 "numpy<2.3"
export TRITON_INTERPRET := 1
endif

.PHONY: test bench lint setup clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(PINS) -e ".[test,bench]"
	touch $@

setup: $(VENV)/.installed

# pytest -n auto: one pytest-xdist worker per core (on the 2-core CI machine the
# interpreter-bound suite takes 9.5 min instead of 16)
test: setup
	$(PY) -m ruff check src tests tools examples
	$(PY) -m ruff format --check src tests tools examples
	$(PY) -m pytest -q -n auto

bench: setup
	$(VENV)/bin/convgemm bench --suite seed --check

clean:
	rm -rf $(VENV) .pytest_cache
