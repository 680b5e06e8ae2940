# The only entry points: the README's two commands (demo, test) and the helpers they use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
FRONT  := $(VENV)/.front-stamp
TOOLS  := .tools/bin
# Tests, the demo and the benchmarks find the real render tools here first.
export PATH := $(CURDIR)/$(TOOLS):$(CURDIR)/$(BIN):$(PATH)
export DRIFTGUARD_HELM ?= $(CURDIR)/$(TOOLS)/helm
export DRIFTGUARD_KUSTOMIZE ?= $(CURDIR)/$(TOOLS)/kubectl

.PHONY: setup tools browser lint test test-all corpus demo bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --config-settings editable_mode=compat -e '.[test,bench]'
	touch $@

$(TOOLS)/helm $(TOOLS)/kubectl &: scripts/install_tools.py | $(BIN)/python
	$(BIN)/python scripts/install_tools.py $(TOOLS)

# driftguard-cmp's native front (cmp_plugin/preload/front.c) replaces pip's script after every
# install; a C compiler is installed here when root and missing, as the browser is below.
$(FRONT): cmp_plugin/preload/front.c scripts/build_front.py $(STAMP)
	@if command -v $${CC:-cc} >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev; \
	fi
	$(BIN)/python scripts/build_front.py $(BIN)
	touch $@

setup: $(STAMP) $(FRONT) tools browser

# The browser test drives Debian's own chromium headless (nothing downloads a browser): installed
# here when root and missing; otherwise tests/notifier/test_incidents_page.py says what to install.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver; \
	else echo "make setup: chromium and chromium-driver are missing (not root: apt-get install chromium chromium-driver)"; fi

tools: $(TOOLS)/helm $(TOOLS)/kubectl

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python scripts/import_graph.py

# The fast lane (a few minutes on 2 cores): every area, without the tests marked slow. test-all
# runs everything, the property tests with the larger `ci` example counts (docs/development.md).
test: lint
	DRIFTGUARD_TEST_LANE=fast $(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

test-all: lint
	DRIFTGUARD_TEST_LANE=all $(BIN)/python -m pytest $(PYTEST_ARGS)

# The development corpora beside the project (../shared/corpus): real charts, Argo CD's own cases.
corpus: setup
	$(BIN)/python scripts/corpus.py

demo: setup
	$(BIN)/python scripts/demo.py

bench: setup
	@set -e; for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b; done

clean:
	rm -rf $(VENV) .tools .pytest_cache .mypy_cache .ruff_cache
