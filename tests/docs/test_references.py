"""Every repository path and every name of agentrun's code that README.md and docs/ put in
backticks names something that exists: a moved file or a renamed module, class, method or field
fails here, with the page and the span.

Only ```single backtick``` spans outside fenced code blocks are read. The rules, in order:

**Paths.** A span of path characters (letters, digits, ``_ . - / *``; no space, no ``://``,
not starting with ``/``, which is a URL's path) is a repository path when it ends in a file suffix
the repository uses (``SUFFIXES``), or when it contains ``/`` and its first segment is an entry
of the repository root, of the source root ``operator/`` or of the package ``operator/agentrun/``
(the pages say "paths are under ``operator/agentrun/``"). A first segment with a dot in it that
is no file name is a domain (``agentrun.dev/tenant``, ``k8s.io/kubernetes``), and any other span
with a ``/`` (``agentruns/status``, ``tools/call``) is not a path of this repository. A path must
exist under the root, ``operator/`` or ``operator/agentrun/``; a bare file name (no ``/``) must be
the name of some file of the repository (the prose around it says where).

**Code names.** A dotted name (identifiers joined by ``.``, perhaps ending in ``()``) that is not
a file name is agentrun's code, and must resolve, when

- it starts with ``agentrun.``: the longest prefix that imports is the module, the rest is
  looked up attribute by attribute (``NOT_CODE`` lists the few ``agentrun.`` names that are
  not Python: the API group, the entry point group, the span name);
- its first part is a class name (``_``? then a capital, and a lower-case letter somewhere):
  it must be a class defined in an agentrun module (or one of ``tests/support``, which the pages
  name for the test harness) and the rest an attribute of one class of that name: a class
  attribute, a method or property, a field (annotation, pydantic or dataclass field, enum
  member) or an attribute its methods assign (``self.name =``). A class name that is no
  class of ours is a failure unless ``FOREIGN_CLASSES`` lists it;
- its first part is the last part of an agentrun (or ``bench``) module's name (``stores``,
  ``lifecycle``, ``worker``), or is ``spec``/``status``: it must be an attribute of a module whose
  name ends in its leading parts, a field path of one of the CRDs, or a key path of the chart's
  ``values.yaml`` (``tracing.sampleRatio`` is a Helm value, not ``agentrun.runner._tracing``).

Not code, whatever its first part: a host or API group (the last part a top-level domain the
pages use, ``agents.agentrun.dev``, ``cluster.local``), a declaration's path with a placeholder
written in capitals (``tools.NAME.disposition``), a name whose first part is another installed
project's top-level package (``anthropic.messages.create``), and the few names of other projects
that happen to start like a module of ours (``FOREIGN_NAMES``). Any other dotted name
(``httpx2.ConnectError``, ``chat.completions.create``, a table's column) is another project's,
and is not checked. Bare single names are checked where a page says which
module holds them: the "names to look for" of docs/architecture.md's table of concepts must be
defined in the modules its "where" column names.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import pkgutil
import re
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

import agentrun
from tests.docs.samples import DOCUMENTS, ROOT

SOURCE = ROOT / "operator"
PACKAGE = SOURCE / "agentrun"
BASES = (ROOT, SOURCE, PACKAGE)
SUFFIXES = (".py", ".md", ".yaml", ".yml", ".sh", ".sql", ".toml", ".txt", ".json", ".tpl", ".go")

# ``agentrun.`` names that are not Python: the API group of the CRDs, the entry point group agents
# register under, and the span a boundary write opens (docs/providers.md).
NOT_CODE = frozenset({"agentrun.dev", "agentrun.agents", "agentrun.checkpoint"})
# Class names the pages use that are another project's (none today).
FOREIGN_CLASSES: frozenset[str] = frozenset()
# Other projects' names whose first part is also the name of a module of ours: the Anthropic
# SDK's ``client.messages.create`` (agentrun._messages).
FOREIGN_NAMES = frozenset({"messages.create"})
# The last part of a host name or an API group.
DOMAINS = frozenset({"dev", "local", "io", "com", "org", "net"})

_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_SPAN = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"[\w.*-]+(?:/[\w.*-]*)*")
_DOTTED = re.compile(r"(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?")
_CLASS = re.compile(r"_?[A-Z]\w*")


def spans(document: Path) -> Iterator[str]:
    """Every single-backtick span of ``document`` outside its fenced code blocks."""
    yield from _SPAN.findall(_FENCE.sub("", document.read_text()))


@cache
def _repository_files() -> frozenset[str]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return frozenset(listed.split())


@cache
def _first_segments() -> frozenset[str]:
    return frozenset(entry.name for base in BASES for entry in base.iterdir())


def path_problem(span: str) -> str | None:
    """Why ``span``, read as a repository path, names nothing; None if it is no path or exists."""
    if "://" in span or span.startswith("/") or not _PATH.fullmatch(span):
        return None
    is_file = span.endswith(SUFFIXES)
    if "/" not in span:
        if not is_file:
            return None
        names = {Path(file).name for file in _repository_files()}
        return None if span in names else "no file of the repository has this name"
    first = span.split("/", 1)[0]
    if "." in first and not first.endswith(SUFFIXES) and first not in _first_segments():
        return None  # a domain: agentrun.dev/tenant, k8s.io/kubernetes
    if not is_file and first not in _first_segments():
        return None  # agentruns/status, tools/call: not a path of this repository
    if "*" in span:
        found = any(any(base.glob(span)) for base in BASES)
    else:
        found = any((base / span).exists() for base in BASES)
    return None if found else "no such path under the root, operator/ or operator/agentrun/"


@cache
def modules() -> dict[str, ModuleType]:
    """Every module of agentrun and of bench, imported, by dotted name."""
    found: dict[str, ModuleType] = {"agentrun": agentrun}
    for package in ("agentrun", "bench", "tests.support"):
        root = importlib.import_module(package)
        found[package] = root
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if info.name.endswith("__main__"):
                continue
            found[info.name] = importlib.import_module(info.name)
    return found


@cache
def classes() -> dict[str, list[type]]:
    """Every class defined in a module of ``modules()``, by its name."""
    found: dict[str, list[type]] = {}
    for module in modules().values():
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == module.__name__:
                found.setdefault(value.__name__, []).append(value)
    return found


def _has(owner: Any, name: str) -> bool:
    if hasattr(owner, name):
        return True
    if not inspect.isclass(owner):
        return False
    for klass in owner.__mro__:
        if name in getattr(klass, "__annotations__", {}):
            return True
    if dataclasses.is_dataclass(owner) and name in {f.name for f in dataclasses.fields(owner)}:
        return True
    if name in getattr(owner, "model_fields", {}):
        return True
    try:
        source = inspect.getsource(owner)
    except (OSError, TypeError):
        return False
    return re.search(rf"\bself\.{re.escape(name)}\s*(?::[^=]+)?=", source) is not None


def _resolves(owner: Any, parts: list[str]) -> bool:
    for index, part in enumerate(parts):
        if not _has(owner, part):
            return False
        if index < len(parts) - 1:
            owner = getattr(owner, part, None)
            if owner is None:
                return False
    return True


@cache
def _key_paths() -> frozenset[str]:
    """The dotted key paths of the chart's values.yaml and of both CRDs' schemas."""
    paths: set[str] = set()

    def walk(value: Any, prefix: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                path = f"{prefix}.{key}" if prefix else str(key)
                paths.add(path)
                walk(item, path)

    walk(yaml.safe_load((ROOT / "charts/agentrun-operator/values.yaml").read_text()), "")

    def schema(node: dict[str, Any], prefix: str) -> None:
        for key, sub in node.get("properties", {}).items():
            path = f"{prefix}.{key}" if prefix else key
            paths.add(path)
            schema(sub, path)
        if "items" in node:
            schema(node["items"], prefix)
        if isinstance(node.get("additionalProperties"), dict):
            schema(node["additionalProperties"], prefix)

    for crd in sorted((ROOT / "crds").glob("*.yaml")):
        for version in yaml.safe_load(crd.read_text())["spec"]["versions"]:
            schema(version["schema"]["openAPIV3Schema"], "")
    return frozenset(paths)


def name_problem(span: str) -> str | None:
    """Why ``span``, read as a name of agentrun's code, names nothing; None if it is none."""
    match = _DOTTED.fullmatch(span)
    if match is None or span.endswith(SUFFIXES):
        return None
    parts = match["name"].split(".")
    if parts[0] == "agentrun":
        if match["name"] in NOT_CODE or match["name"].startswith("agentrun.dev"):
            return None
        for split in range(len(parts), 0, -1):
            module = modules().get(".".join(parts[:split]))
            if module is not None:
                return None if _resolves(module, parts[split:]) else "not in agentrun"
        return "no such module"
    if _CLASS.fullmatch(parts[0]) and any(c.islower() for c in parts[0]):
        if parts[0] in FOREIGN_CLASSES:
            return None
        candidates = classes().get(parts[0])
        if not candidates:
            return "no class of agentrun has this name"
        if any(_resolves(klass, parts[1:]) for klass in candidates):
            return None
        return f"no {parts[0]} of agentrun has {'.'.join(parts[1:])}"
    short = {name.rsplit(".", 1)[-1] for name in modules()}
    if parts[0] not in short and parts[0] not in {"spec", "status"}:
        return None  # another project's: httpx2.ConnectError, chat.completions.create
    if parts[-1] in DOMAINS or match["name"] in FOREIGN_NAMES:
        return None  # agents.agentrun.dev, cluster.local; the Anthropic SDK's messages.create
    if any(part.isupper() for part in parts):
        return None  # a placeholder: tools.NAME.disposition
    if match["name"] in _key_paths():
        return None  # a CRD field (spec.tenant) or a Helm value (tracing.sampleRatio)
    for name, module in modules().items():
        for split in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:split])
            named = name == prefix or name.endswith("." + prefix)
            if named and _resolves(module, parts[split:]):
                return None
    if parts[0] not in {"agentrun", "bench", "tests"} and importlib.util.find_spec(parts[0]):
        return None  # another project's package: anthropic.messages.create
    return "neither a module attribute, a CRD field nor a Helm value"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_backticked_paths_exist(document: Path) -> None:
    broken = [
        f"`{span}`: {problem}"
        for span in dict.fromkeys(spans(document))
        if (problem := path_problem(span)) is not None
    ]
    assert broken == []


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_backticked_code_names_resolve(document: Path) -> None:
    broken = [
        f"`{span}`: {problem}"
        for span in dict.fromkeys(spans(document))
        if (problem := name_problem(span)) is not None
    ]
    assert broken == []


def _concept_rows() -> list[tuple[str, str, str]]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("## Where each concept lives", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in {"concept", "---"}:
            rows.append((cells[0], cells[1], cells[2]))
    return rows


def _modules_at(where: str) -> list[ModuleType]:
    """The modules the paths of a "where" cell name (a file, or a folder and what it holds)."""
    found: list[ModuleType] = []
    for span in _SPAN.findall(where):
        if not _PATH.fullmatch(span) or not (span.endswith(".py") or span.endswith("/")):
            continue
        dotted = "agentrun." + span.removesuffix(".py").rstrip("/").replace("/", ".")
        found.extend(
            module
            for name, module in modules().items()
            if name == dotted or name.startswith(dotted + ".")
        )
    return found


def test_the_concept_table_has_rows() -> None:
    assert len(_concept_rows()) > 20


@pytest.mark.parametrize("row", _concept_rows(), ids=lambda row: row[0])
def test_a_concepts_names_are_where_the_table_says(row: tuple[str, str, str]) -> None:
    _, where, names = row
    places = _modules_at(where)
    missing = []
    for name in _SPAN.findall(names):
        parts = name.removesuffix("()").split(".")
        if not all(part.isidentifier() for part in parts):
            continue
        if not any(_resolves(module, parts) for module in places):
            missing.append(name)
    assert missing == [], f"not in {[module.__name__ for module in places]}"
