# Every target that runs something first makes sure it is installed (hack/install-deps.sh is
# idempotent), so `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
PYTEST_ARGS ?=

.PHONY: deps test lint demo bench

deps:
	@bash hack/install-deps.sh

test: deps
	$(PYTHON) -m pytest $(PYTEST_ARGS)

lint: deps
	$(PYTHON) -m ruff check operator tests bench
	$(PYTHON) -m ruff format --check operator tests bench
	$(PYTHON) -m mypy

demo: deps
	bash hack/demo.sh

bench: deps
	$(PYTHON) -m bench.checkpoint_write
