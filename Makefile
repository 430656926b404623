# deskbridge — the two set-up commands are `make demo` and `make test`; both build .venv on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint security bench fuzz docs clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,export]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/deskbridge demo

test: $(STAMP)
	$(PY) -m ruff check src tests bench
	$(PY) -m pytest -q

security: $(STAMP)
	$(PY) -m pytest -q -m security

lint: $(STAMP)
	$(PY) -m ruff check src tests bench
	$(PY) -m ruff format --check src tests bench

bench: $(STAMP)
	@for b in bench/[!_]*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

fuzz: $(STAMP)
	$(PY) -m deskbridge.fuzz --inputs 1000000

docs: $(STAMP)
	$(PY) scripts/gen_tool_reference.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
