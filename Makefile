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

$(VENV)/.installed-server: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[server]'
	touch $@

# mypy checks the package under its import name, shoal.* (pyproject's [tool.mypy] packages and mypy_path):
# .mypy-path/shoal links to this checkout, whatever its folder is called, so that every shoal.* import
# resolves. Named by their folders (mypy common ...), the modules were <folder>.common.* and each
# shoal.* import an unresolved one, silently Any: no error across modules was ever reported. A dot folder,
# not one under build/: [tool.mypy] exclude's ^build/ would leave the linked modules out, and mypy walks
# no dot folder when given one to check (mypy . stays as it was).
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	mkdir -p .mypy-path && ln -sfn .. .mypy-path/shoal
	$(VENV)/bin/mypy

# pytest (with the browser round, tests/clients/js), then the TypeScript device's own tests (tsc strict,
# every conformance vector in Node and in chromium) when its packages are installed (cd clients/js && npm ci).
test: lint
	$(PY) -m pytest -n 2 --durations=25
	@if command -v npm >/dev/null && [ -d clients/js/node_modules ]; then cd clients/js && npm test; \
	else echo "make test: the TypeScript device's tests were not run (cd clients/js && npm ci && npm run build)"; fi

# The demo installs only what it runs (the server extra: server, shuffler, simulator), not the dev
# and scale extras; it keeps its round in build/demo and ends with the dashboard (shoal sim --keep).
demo: $(VENV)/.installed-server
	$(VENV)/bin/shoal sim --users 5000 --via-shuffler --keep build/demo

demo-core: $(VENV)/.installed
	$(VENV)/bin/shoal demo

bench: $(VENV)/.installed
	$(VENV)/bin/shoal bench --out tests/bench/results

# The documentation site into build/site; warnings (broken links, anchors, nav) are errors.
docs: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[server,docs]'
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d build/site

clean:
	rm -rf $(VENV) build .mypy-path *.egg-info
