# Two set-up commands: `make demo` and `make test`. Both create the locked environment first.
SHELL := /bin/bash
PYTHON ?= python3.11
UV_VERSION := 0.13.8
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
BIN := $(VENV)/bin

# Both Prefect and Great Expectations phone home unless told not to; this machine has no internet.
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export GX_ANALYTICS_ENABLED := false
export DO_NOT_TRACK := 1
# The first ephemeral Prefect server start creates its database; 20 s (the default) is too short here.
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 120
export UV_PYTHON_DOWNLOADS := never

DEMO_THEME := examples/themes/pharmacy_refills.yaml

# The end-to-end tests drive the Prefect UI in a real browser and run the docker-compose topology
# as local processes (PostgreSQL behind the Prefect server): both come from Debian packages.
# Generated code runs only inside bubblewrap (src/sopforge/sandbox/boundary.py): the demo needs it too.
SANDBOX_PACKAGES := bubblewrap
SYSTEM_PACKAGES := chromium chromium-driver postgresql $(SANDBOX_PACKAGES)

.PHONY: demo test env system-deps sandbox-deps clean-state lint-deps

env: $(VENV)/.synced

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet uv==$(UV_VERSION)

# --compile-bytecode and compileall: with PYTHONDONTWRITEBYTECODE set (common in containers and
# CI), Python would otherwise compile every module of prefect, pydantic & co. from source at each
# start, which made `sopforge --help` take 7 s and every generate pay 10 s more.
$(VENV)/.synced: uv.lock pyproject.toml | $(UV)
	$(UV) sync --frozen --python $(PYTHON) --compile-bytecode
	$(BIN)/python -m compileall -q src flows benchmarks > /dev/null
	touch $@

demo: env sandbox-deps
	$(BIN)/sopforge generate $(DEMO_THEME)

# Every test, both tiers, on TEST_WORKERS pytest-xdist workers (tests/README.md). loadgroup keeps the
# tests that share a module or session fixture (the local topology, the demo) on one worker; without
# reordering, tests start in the order tests/conftest.py gives them.
TEST_WORKERS ?= 3
test: env system-deps
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

sandbox-deps:
	@if [ -x /usr/bin/bwrap ]; then \
		echo "system packages present: $(SANDBOX_PACKAGES)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(SANDBOX_PACKAGES); \
	else \
		echo "error: generated code runs only inside bubblewrap: run 'sudo apt-get install $(SANDBOX_PACKAGES)' and retry" >&2; exit 2; \
	fi

system-deps:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && [ -x /usr/bin/bwrap ]; then \
		echo "system packages present: $(SYSTEM_PACKAGES)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(SYSTEM_PACKAGES); \
	else \
		echo "error: the tests need the Debian packages $(SYSTEM_PACKAGES): run 'sudo apt-get install $(SYSTEM_PACKAGES)' and retry" >&2; exit 2; \
	fi

clean-state:
	rm -rf artifacts/sopforge.duckdb artifacts/sopforge.duckdb.wal artifacts/exports artifacts/exchange artifacts/prefect
