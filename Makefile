# The two commands of the quick start. Both create .venv with Python 3.11 when it is missing.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev
# The PyTorch release the suite is tested with. Where its CPU build lies on disk (as on our CI machines), pip takes
# it: about 1 GB in .venv, against over 5 GB for the CUDA build of the newest release the torch extra allows.
# Another release: make TORCH='torch==2.14.1' ...
TORCH ?= torch==2.13.0

.PHONY: demo test install install-dev bench bench-search bench-checkpoint bench-ddp bench-load bench-bookkeeping bench-cli bench-scale bench-startup clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[torch]" "$(TORCH)"
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[dev]" "$(TORCH)"
	touch $@ $(STAMP_RUN)

install: $(STAMP_RUN)
install-dev: $(STAMP_DEV)

## demo: a random hyperparameter search of an MLP on scikit-learn's digits, on the embedded master
demo: $(STAMP_RUN)
	$(BIN)/det experiment create examples/digits_pytorch/random.yaml examples/digits_pytorch

# Test workers (pytest-xdist); a module's tests stay on one worker, so its module-scoped servers are started once.
# Three on 2 cores: the tests wait on subprocesses much of the time (SQLite stage 10:58 with 3, 12:10 with 2).
TEST_WORKERS ?= 3
XDIST := -n $(TEST_WORKERS) --dist loadscope

## test: the layers' import contracts (pyproject.toml), the whole suite on SQLite, then the master, client SDK,
## server and auth tests again on PostgreSQL
test: $(STAMP_DEV)
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q $(XDIST)
	DET_TEST_DB=postgres $(BIN)/python -m pytest -q $(XDIST) -p tests._postgres tests/master tests/client tests/server tests/auth tests/importer tests/scheduling

bench: $(STAMP_DEV)
	$(BIN)/python benchmarks/pytorch_overhead.py

bench-search: $(STAMP_DEV)
	$(BIN)/python -m pip install -q -r benchmarks/requirements-search.txt
	$(BIN)/python benchmarks/search_quality.py

bench-checkpoint: $(STAMP_DEV)
	$(BIN)/python benchmarks/checkpoint_io.py

bench-ddp: $(STAMP_DEV)
	$(BIN)/python benchmarks/ddp_scaling.py

bench-load: $(STAMP_DEV)
	$(BIN)/python benchmarks/master_load.py

bench-startup: $(STAMP_DEV)
	$(BIN)/python benchmarks/startup.py

bench-cli: $(STAMP_RUN)
	$(BIN)/python benchmarks/cli_latency.py

bench-scale: $(STAMP_DEV)
	$(BIN)/python benchmarks/master_scale.py

bench-bookkeeping: $(STAMP_DEV)
	$(BIN)/python -m pip install -q -r benchmarks/requirements-bookkeeping.txt
	$(BIN)/python benchmarks/bookkeeping.py

clean:
	rm -rf $(VENV) .pytest_cache
