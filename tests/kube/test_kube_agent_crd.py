"""The Agent CRD, the kit's ``AgentSpec`` and the examples say the same thing.

The operator reads an Agent's spec with ``AgentResourceSpec`` (the kit's ``AgentSpec`` and a
budget) and writes its status through ``AgentStatus``; a field the CRD has and the model lacks is
a spec the operator refuses, and the reverse one the API server prunes. Field names are compared
in both directions at every depth; every field carries a description for ``kubectl explain``; the
examples are accepted by the API server and by the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from tests.support.kube import REPO, Kube

from agentrun.operator._agent_resource import (
    AGENT_KIND,
    AGENT_PLURAL,
    AgentResourceSpec,
    AgentStatus,
)
from agentrun.operator._resource import GROUP, VERSION

Schema = dict[str, Any]
CRD = REPO / "crds" / "agents.agentrun.dev.yaml"
EXAMPLES = sorted((REPO / "examples").glob("agent-*.yaml"))


def crd() -> Schema:
    loaded: Schema = yaml.safe_load(CRD.read_text())
    return loaded


def root() -> Schema:
    (version,) = crd()["spec"]["versions"]
    schema: Schema = version["schema"]["openAPIV3Schema"]
    return schema


def crd_names(node: Schema) -> Schema:
    """Field names at every depth: an object's properties, a list's items, a map's values."""
    if "properties" in node:
        return {name: crd_names(child) for name, child in node["properties"].items()}
    for nested in ("items", "additionalProperties"):
        if isinstance(node.get(nested), dict) and "properties" in node[nested]:
            return {f"[{nested}]": crd_names(node[nested])}
    return {}


def model_names(node: Schema, defs: Schema) -> Schema:
    if "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[-1]]
    if "anyOf" in node:  # X | None is read as X, a string or a secret reference as the reference
        (present,) = [b for b in node["anyOf"] if b.get("type") not in ("null", "string")] or [{}]
        return model_names(present, defs)
    if "properties" in node:
        return {name: model_names(child, defs) for name, child in node["properties"].items()}
    for nested in ("items", "additionalProperties"):
        if isinstance(node.get(nested), dict):
            inner = model_names(node[nested], defs)
            if inner:
                return {f"[{nested}]": inner}
    for value in (node.get("patternProperties") or {}).values():  # a map with checked keys
        inner = model_names(value, defs)
        if inner:
            return {"[additionalProperties]": inner}
    return {}


def names_of(model: type[BaseModel]) -> Schema:
    schema = model.model_json_schema(by_alias=True)
    return model_names(schema, schema.get("$defs", {}))


@pytest.mark.parametrize(("part", "model"), [("spec", AgentResourceSpec), ("status", AgentStatus)])
def test_the_crd_and_the_model_name_the_same_fields(part: str, model: type[BaseModel]) -> None:
    from_crd = crd_names(root()["properties"][part])
    from_model = names_of(model)
    if part == "spec":  # a header's value is a string or a secret reference, nothing else
        reference: Schema = {"prefix": {}, "valueFrom": {"secretKeyRef": {"key": {}, "name": {}}}}
        headers = from_crd["tools"]["mcp"]["[items]"]["headers"]
        assert headers == {"[additionalProperties]": reference}
    assert from_crd == from_model


def test_every_field_is_described_for_kubectl_explain() -> None:
    undescribed: list[str] = []

    def walk(node: Schema, path: str) -> None:
        if path != "metadata" and not node.get("description"):
            undescribed.append(path or "(root)")
        for name, child in (node.get("properties") or {}).items():
            walk(child, f"{path}.{name}".lstrip("."))
        for nested in ("items", "additionalProperties"):
            child = node.get(nested)
            if isinstance(child, dict) and "properties" in child:
                walk(child, f"{path}[]")

    walk(root(), "")
    assert not undescribed, undescribed


def test_names_match_the_crd() -> None:
    definition = crd()
    assert definition["metadata"]["name"] == f"{AGENT_PLURAL}.{GROUP}"
    assert definition["spec"]["names"]["kind"] == AGENT_KIND
    assert [v["name"] for v in definition["spec"]["versions"]] == [VERSION]


def test_there_is_an_example_with_mcp_tools_and_one_with_http_tools() -> None:
    specs = [
        AgentResourceSpec.model_validate(yaml.safe_load(p.read_text())["spec"]) for p in EXAMPLES
    ]
    assert any(spec.tools.mcp for spec in specs)
    assert any(spec.tools.http for spec in specs)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_api_server_accepts_the_example(kube: Kube, example: Path) -> None:
    done = kube.kubectl("apply", "--dry-run=server", "-f", str(example))
    assert "(server dry run)" in done.stdout


def _unsupported_provider(spec: Schema) -> None:
    spec["model"]["provider"] = "gemini"


def _override_outside_the_allow_list(spec: Schema) -> None:
    server = spec["tools"]["mcp"][0]
    server["allowedTools"] = ["search_flights"]
    server["tools"] = {"charge_card": {"disposition": "idempotent"}}


def _not_streamable_http(spec: Schema) -> None:
    spec["tools"]["mcp"][0]["url"] = "ftp://example"


def _two_servers_of_one_name(spec: Schema) -> None:
    spec["tools"]["mcp"].append(dict(spec["tools"]["mcp"][0]))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_unsupported_provider, 'spec.model.provider: Unsupported value: "gemini"'),
        (_override_outside_the_allow_list, "tools overrides name tools outside allowedTools"),
        (_not_streamable_http, "url must be an http:// or https:// URL"),
        (_two_servers_of_one_name, "spec.tools.mcp[1]: Duplicate value"),
    ],
    ids=lambda value: getattr(value, "__name__", "")[1:] or None,
)
def test_the_crd_refuses_what_does_not_fit_and_says_why(kube: Kube, change: Any, said: str) -> None:
    bad = yaml.safe_load((REPO / "examples" / "agent-mcp-tools.yaml").read_text())
    change(bad["spec"])
    done = kube.kubectl(
        "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(bad), check=False
    )
    assert done.returncode != 0
    assert said in done.stderr, done.stderr


def test_kubectl_explain_reads_the_descriptions(kube: Kube) -> None:
    explained = kube.kubectl("explain", "agent.spec.model.apiKey").stdout
    assert "never written into a checkpoint, status, event or log" in " ".join(explained.split())
