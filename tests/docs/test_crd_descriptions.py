"""Every field of both CRDs has a description, so ``kubectl explain`` says what it is, in which
units and what it defaults to; and the chart's copies are the canonical files, byte for byte.

Read statically from the YAML (no API server), so it runs in ``make test-fast``. A field is every
entry of a schema's ``properties``, at any depth (through ``items`` and ``additionalProperties``),
and the element schema of an array of objects, which documentation generators render as one.
The root's ``metadata`` is the one field left out: the API server refuses a CRD whose schema says
anything of it but its type (``kubectl explain`` describes it from ObjectMeta anyway).
The copies are also checked by ``tests/kube/test_kube_chart.py``, whose directory carries the
``kube`` marker and so stays out of ``make test-fast``; an edit of one CRD fails here first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.docs.samples import ROOT

CRDS = sorted((ROOT / "crds").glob("*.yaml"))
CHART_FILES = ROOT / "charts" / "agentrun-operator" / "files"


def undescribed(node: dict[str, Any], path: str) -> list[str]:
    """The paths under ``node`` (itself included) of the fields with no description."""
    missing = [] if node.get("description", "").strip() else [path or "<root>"]
    for name, field in node.get("properties", {}).items():
        if not path and name == "metadata":
            continue  # ObjectMeta: the API server forbids describing it here
        missing.extend(undescribed(field, f"{path}.{name}"))
    items = node.get("items")
    if isinstance(items, dict):
        if items.get("type") == "object":
            missing.extend(undescribed(items, f"{path}[]"))
        else:
            for name, field in items.get("properties", {}).items():
                missing.extend(undescribed(field, f"{path}[].{name}"))
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        for name, field in extra.get("properties", {}).items():
            missing.extend(undescribed(field, f"{path}{{}}.{name}"))
    return missing


def test_there_are_three_crds() -> None:
    assert [crd.name for crd in CRDS] == [
        "agentruns.agentrun.dev.yaml",
        "agents.agentrun.dev.yaml",
        "runquotas.agentrun.dev.yaml",
    ]


@pytest.mark.parametrize("crd", CRDS, ids=lambda path: path.name)
def test_every_field_has_a_description(crd: Path) -> None:
    missing = [
        f"{version['name']}: {path}"
        for version in yaml.safe_load(crd.read_text())["spec"]["versions"]
        for path in undescribed(version["schema"]["openAPIV3Schema"], "")
    ]
    assert missing == []


def test_the_walk_finds_a_field_without_one() -> None:
    schema = {
        "description": "root",
        "properties": {
            "spec": {
                "description": "spec",
                "properties": {
                    "a": {"type": "integer"},
                    "b": {"type": "array", "description": "b", "items": {"type": "object"}},
                },
            }
        },
    }
    assert undescribed(schema, "") == [".spec.a", ".spec.b[]"]


@pytest.mark.parametrize("crd", CRDS, ids=lambda path: path.name)
def test_the_chart_carries_the_crd_byte_for_byte(crd: Path) -> None:
    assert (CHART_FILES / crd.name).read_bytes() == crd.read_bytes()
