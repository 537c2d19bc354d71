"""What the import contracts in pyproject.toml cannot say for themselves.

``make lint`` runs import-linter on ``[tool.importlinter]``: the layers, the independence of the
store adapters and of the CLI from the operator, and no cluster client or store driver in the kit.
It checks only the modules a contract names, so here: every module of the package is in a layer;
the kit really imports (and its public names resolve) with kopf, the Kubernetes client and the
store drivers absent; and a missing driver says which extra to install.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import agentrun

PACKAGE = Path(agentrun.__file__).parent
PYPROJECT = PACKAGE.parent.parent / "pyproject.toml"
ABSENT = ("kopf", "kubernetes", "redis", "asyncpg", "prometheus_client")


def _python(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh interpreter where the operator's dependencies cannot be imported."""
    blocked = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in ABSENT)
    return subprocess.run(
        [sys.executable, "-c", blocked + script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_every_module_of_the_package_is_in_a_layer() -> None:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    named = {
        module.strip().removeprefix("agentrun.")
        for layer in layers
        for module in layer.replace("|", ":").split(":")
    }
    top_level = {
        path.stem if path.is_file() else path.name
        for path in PACKAGE.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()
    }
    assert top_level - named == set(), "add these to a layer of [tool.importlinter]"
    assert named - top_level == set(), "these layers name modules that do not exist"


def test_every_module_of_the_kit_is_kept_free_of_drivers() -> None:
    """The forbidden contract names its modules one by one: a new kit module must join it.
    Only the front ends (the CLI, the console, the operator), the two adapters that need a
    driver (and the package that opens them lazily) and the compatibility modules (``_compat``:
    one a dependency family, kopf's among them; a kit module importing that one breaks the
    contract all the same) are left out."""
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    forbidden = next(c for c in contracts if c["type"] == "forbidden")["source_modules"]
    kit = {
        module.strip()
        for layer in layers
        for module in layer.replace("|", ":").split(":")
        if module.strip()
        not in (
            "agentrun.cli",
            "agentrun.console",
            "agentrun.operator",
            "agentrun.stores",
            "agentrun._compat",
        )
    } | {"agentrun.stores._memory", "agentrun.stores._sqlite"}
    assert set(forbidden) == kit


def test_the_kit_imports_without_kopf_kubernetes_or_store_drivers() -> None:
    done = _python(
        "import agentrun\n"
        "from agentrun import AgentRunner, Backend, open_backend\n"
        "missing = [n for n in agentrun.__all__ if not hasattr(agentrun, n)]\n"
        "assert not missing, missing\n"
        "try:\n"
        "    import kopf\n"
        "except ImportError:\n"  # the block means something: kopf cannot be imported
        "    print('ok', len(agentrun.__all__))\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")


def test_a_missing_store_driver_names_the_extra_to_install() -> None:
    done = _python(
        "import asyncio, agentrun\n"
        "for url in ('redis://127.0.0.1:1/0', 'postgresql://nobody@127.0.0.1:1/none'):\n"
        "    try:\n"
        "        asyncio.run(agentrun.open_backend(url))\n"
        "    except ImportError as error:\n"
        "        print(type(error).__name__, error)\n"
    )
    assert done.returncode == 0, done.stderr
    redis, postgres = done.stdout.splitlines()
    assert redis.startswith("ImportError ")
    assert "pip install 'agentrun[redis]'" in redis
    assert postgres.startswith("ImportError ")
    assert "pip install 'agentrun[postgres]'" in postgres


def test_the_loop_imports_without_the_agents_extra() -> None:
    """The vendors' SDKs, MCP, httpx2 and jsonschema are the ``agents`` extra: the loop, the
    scripted provider and the registry run without them, and only the modules that use them
    (``runner._providers.openai`` and the like) need them."""
    script = (
        "import sys\n"
        "for name in ('openai', 'anthropic', 'mcp', 'httpx2', 'jsonschema', 'aiohttp'):\n"
        "    sys.modules[name] = None\n"
        "import agentrun.runner, agentrun.runner._loop, agentrun.runner._registry\n"
        "import agentrun.runner._spec, agentrun.runner._secrets, agentrun.runner._tracing\n"
        "import agentrun.demo.booking, agentrun.cli.main\n"
        "try:\n"
        "    import agentrun.runner._providers.openai\n"
        "except ImportError:\n"
        "    print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_every_module_of_the_runner_and_the_operator_is_in_a_nested_layer() -> None:
    """The runner's and the operator's own layers (contracts with a container) name every module
    of their subpackage, as the package's layers do (``__main__``, which nothing imports, aside)."""
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    nested = {c["containers"][0]: c["layers"] for c in contracts if c.get("containers")}
    assert set(nested) == {"agentrun.runner", "agentrun.operator"}
    for container, layers in nested.items():
        folder = PACKAGE / container.removeprefix("agentrun.")
        named = {m.strip() for layer in layers for m in layer.replace("|", ":").split(":")}
        modules = {
            path.stem if path.is_file() else path.name
            for path in folder.iterdir()
            if (path.suffix == ".py" and path.stem not in ("__init__", "__main__"))
            or (path / "__init__.py").exists()
        }
        assert modules - named == set(), f"add these to a layer of {container}"
        assert named - modules == set(), f"{container}'s layers name modules that do not exist"


def test_the_http_stack_needs_no_httpx_aiohttp() -> None:
    """The shared pool's transport is the runner's own (``runner._connections``): nothing of
    ``httpx-aiohttp`` is used, so it is not a dependency."""
    done = _python(
        "import sys\n"
        "sys.modules['httpx_aiohttp'] = None\n"
        "from agentrun.runner._connections import Connections\n"
        "print(type(Connections().client()).__name__)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "AsyncClient\n"
