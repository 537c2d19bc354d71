# Every target that runs something first makes sure it is installed, so `make demo` and
# `make test` work on a fresh machine. Both scripts are idempotent: after the first run they cost
# seconds. `kube-tools` builds kube-apiserver (minutes, the first time), which only the tests and
# the operator benchmark need.
PYTHON ?= python3
PYTEST_ARGS ?=

.PHONY: deps kube-tools test lint demo bench bench-operator bench-peers

deps:
	@bash hack/install-deps.sh

kube-tools:
	@echo "==> Kubernetes test tools (kube-apiserver, helm, hadolint): hack/kube-tools.sh"
	@bash hack/kube-tools.sh

test: deps kube-tools
	$(PYTHON) -m pytest $(PYTEST_ARGS)

lint: deps
	$(PYTHON) -m ruff check operator tests bench
	$(PYTHON) -m ruff format --check operator tests bench
	$(PYTHON) -m mypy

demo: deps
	bash hack/demo.sh

bench: deps
	$(PYTHON) -m bench.checkpoint_write

bench-operator: deps kube-tools
	$(PYTHON) -m bench.operator_scale

# Ours against LangGraph's checkpointers, in a virtualenv of its own (LangGraph is no dependency).
bench-peers: deps
	bash hack/bench-peers.sh $(BENCH_ARGS)
