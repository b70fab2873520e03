# Each target creates/uses the local virtualenv .venv and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: test demo demo-core bench lint clean docs

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[server,scale,dev]'
	touch $@

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy common client server shuffler deploy

test: lint
	$(PY) -m pytest -n 2 --durations=25

demo: $(VENV)/.installed
	$(VENV)/bin/shoal sim --users 5000 --via-shuffler

demo-core: $(VENV)/.installed
	$(VENV)/bin/shoal demo

bench: $(VENV)/.installed
	$(VENV)/bin/shoal bench --out tests/bench/results

# The documentation site into build/site; warnings (broken links, anchors, nav) are errors.
docs: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[server,docs]'
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d build/site

clean:
	rm -rf $(VENV) build *.egg-info
