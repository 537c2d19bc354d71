"""The kit core is layered (DESIGN §2) and imports without the operator's dependencies.

Each core module may import only modules of its own layer or a lower one, and never the layers
built on top of the core (stores, runner, operator, cli). The kit must import with kopf and the
Kubernetes client absent, so an embedding product does not install a cluster client to
checkpoint a run.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import agentrun

PACKAGE = Path(agentrun.__file__).parent

LAYERS: dict[str, int] = {
    # data
    "_base": 0,
    "errors": 0,
    "messages": 0,
    "frontier": 0,
    # contracts
    "identifiers": 1,
    "idempotency": 1,
    "leases": 1,
    "history": 1,
    "ledger": 1,
    "redaction": 1,
    # the write side
    "checkpointing": 2,
    # decisions
    "resume": 3,
    "continuation": 3,
}
NAMES = ("data", "contracts", "write", "decisions")


def agentrun_imports(module: str) -> set[str]:
    """The first component under ``agentrun`` of every agentrun import in ``module``."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(), filename=f"{module}.py")
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the package
                base = "agentrun" + (f".{node.module}" if node.module else "")
                names = [base] if node.module else [f"agentrun.{a.name}" for a in node.names]
            elif node.module == "agentrun":
                names = [f"agentrun.{alias.name}" for alias in node.names]
            else:
                names = [node.module or ""]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "agentrun" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_the_import_parser_sees_every_form() -> None:
    # resume imports from every layer below it; if the parser missed a form, this would shrink
    assert {"checkpointing", "frontier", "idempotency", "leases", "errors"} <= agentrun_imports(
        "resume"
    )


def test_every_core_module_is_assigned_a_layer() -> None:
    modules = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__"}
    assert modules == set(LAYERS)


@pytest.mark.parametrize("module", sorted(LAYERS))
def test_a_core_module_imports_only_its_layer_or_below(module: str) -> None:
    layer = LAYERS[module]
    for imported in agentrun_imports(module):
        assert imported in LAYERS, (
            f"{module} ({NAMES[layer]}) imports agentrun.{imported}, which is not in the core"
        )
        assert LAYERS[imported] <= layer, (
            f"{module} ({NAMES[layer]}) imports {imported} ({NAMES[LAYERS[imported]]})"
        )


def test_the_kit_imports_without_kopf_kubernetes_or_store_drivers() -> None:
    script = (
        "import sys\n"
        "for name in ('kopf', 'kubernetes', 'redis', 'asyncpg', 'prometheus_client'):\n"
        "    sys.modules[name] = None\n"
        "import agentrun\n"
        "import agentrun.stores.memory, agentrun.stores.backend\n"
        "missing = [n for n in agentrun.__all__ if not hasattr(agentrun, n)]\n"
        "assert not missing, missing\n"
        "print('ok', len(agentrun.__all__))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")


def test_blocking_kopf_really_blocks_it() -> None:
    """The check above means something: with the block in place, kopf cannot be imported."""
    script = "import sys\nsys.modules['kopf'] = None\nimport kopf\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    assert "ModuleNotFoundError" in done.stderr or "ImportError" in done.stderr
