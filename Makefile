# The two commands: `make run` and `make test`. Everything else is what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROTOS := $(wildcard proto/memsvc/v1/*.proto)
# torch is pinned to the CPU build; an unpinned torch would pull a multi-GB CUDA build.
TORCH := torch==2.13.0

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install run test test-all lint typecheck gen check-gen clean system-deps

install: $(STAMP)

# setuptools' notes to package maintainers (editable modes) are not for a person running `make run`.
PIP_INSTALL := PYTHONWARNINGS=ignore $(BIN)/pip install --quiet

$(STAMP): pyproject.toml clients/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip
	$(PIP_INSTALL) "$(TORCH)"
	$(PIP_INSTALL) -e ".[dev]"
	$(PIP_INSTALL) --config-settings editable_mode=compat -e clients/python
	touch $(STAMP)

run: install
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
	$(BIN)/pytest

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
