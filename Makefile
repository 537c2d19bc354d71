# Every target that runs something first makes sure it is installed, so `make demo` and
# `make test` work on a fresh machine. Everything Python runs from the project's own virtualenv
# (.venv in the checkout, made by hack/install-deps.sh); the system interpreter is never written
# to. `kube-tools` builds kube-apiserver (minutes, the first time), which only the tests that need
# a Kubernetes API server and the operator benchmark use. The end-to-end suite (tests/e2e, `make
# e2e`) runs a real single-node cluster (hack/cluster.sh); pytest runs it only when -m names it.
VENV ?= .venv
PYTHON := $(VENV)/bin/python
PYTEST_ARGS ?=
export VENV
# The tests and scripts find the project's python and console scripts first on PATH.
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: deps lock kube-tools cluster-tools images cluster-up cluster-down e2e e2e-kind demo-k8s \
	test test-fast lint demo bench bench-operator bench-agents bench-peers bench-parked bench-quotas bench-console

deps:
	@bash hack/install-deps.sh

# Regenerates constraints.txt (the lock) from a throwaway virtualenv resolved afresh within the
# ranges of pyproject.toml.
lock:
	@bash hack/lock.sh

kube-tools: deps
	@bash hack/kube-tools.sh

# The node's tools (kubelet & co., CoreDNS, crictl, Debian's container runtime): minutes, once.
cluster-tools: deps
	@bash hack/cluster-tools.sh

# The images the cluster runs, made without a registry (hack/images.sh).
images: deps
	@bash hack/images.sh

cluster-up: deps
	@bash hack/cluster.sh up

cluster-down:
	@bash hack/cluster.sh down

# On TEST_WORKERS pytest-xdist workers (default 2, one a core): most of the suite waits on servers,
# leases and subprocesses, so two workers take the whole run from ~33 to ~12 minutes here. Every
# test keeps to its own tenant, namespace, ports and folders, so workers never share state.
TEST_WORKERS ?= 2
test: deps kube-tools
	$(PYTHON) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# Everything that needs no server, on two workers (pytest-xdist): under a minute on two cores.
test-fast: deps
	$(PYTHON) -m pytest -m "not kube and not redis and not postgres and not slow" -q -n 2 $(PYTEST_ARGS)

# The operator's chart and image on a real single-node cluster, which the suite brings up (and
# takes down again unless it was already up).
e2e: deps
	$(PYTHON) -m pytest tests/e2e -m e2e $(PYTEST_ARGS)

# The same suite on a kind cluster (hack/kind-e2e.sh; kind and its node image built here, once).
# E2E_ARGS go to pytest, e.g. E2E_ARGS="-k 'network or takeover'".
E2E_ARGS ?=
e2e-kind: deps
	bash hack/kind-e2e.sh $(E2E_ARGS)

# A booking run on the cluster whose holder pod is killed mid-run; the cluster stays up.
demo-k8s: deps
	bash hack/demo-k8s.sh

lint: deps
	$(PYTHON) -m ruff check operator tests bench hack
	$(PYTHON) -m ruff format --check operator tests bench hack
	$(PYTHON) -m mypy
	$(VENV)/bin/lint-imports

demo: deps
	bash hack/demo.sh

bench: deps
	$(PYTHON) -m bench.checkpoint_write
	$(PYTHON) -m bench.boundaries $(BENCH_ARGS)

bench-operator: deps kube-tools
	$(PYTHON) -m bench.operator_scale

# Runs parked on an approval: what they cost while nothing changes, and waking one
# (BENCH_ARGS=--quick for a small form, or --parked 2000 --working 0 for the issue's figures).
bench-parked: deps kube-tools
	$(PYTHON) -m bench.parked_runs $(BENCH_ARGS)

# A namespace's RunQuota: fair share beside a flooded namespace, the active-run cap sampled from the
# store, a budget's overrun (BENCH_ARGS=--quick for a small form).
bench-quotas: deps kube-tools
	$(PYTHON) -m bench.quotas $(BENCH_ARGS)

# The run console: the first page of 5,000 runs against listing them from the API server, and 50
# browsers' live updates on one watch (BENCH_ARGS=--quick for a small form).
bench-console: deps kube-tools
	$(PYTHON) -m bench.console $(BENCH_ARGS)

# A declared agent whose model answers after 1 s, beside one that answers at once.
bench-agents: deps kube-tools
	$(PYTHON) -m bench.agent_scale $(BENCH_ARGS)

# Ours against LangGraph's checkpointers, in a virtualenv of its own (LangGraph is no dependency).
bench-peers: deps
	bash hack/bench-peers.sh $(BENCH_ARGS)
