"""The pydantic models of AgentRun and RunQuota and their CRDs' schemas say the same thing.

The operator reads and writes through the models while the API server enforces the CRD; a field
present in one and not the other, or a bound that differs, is a status patch the server refuses
or a spec the operator cannot read. Both schemas are reduced to the same shape (properties,
required fields, types, enums, bounds, patterns, list items) and compared whole, so a difference
in either direction fails. No API server is needed for that.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError
from tests.support.kube import REPO

from agentrun.operator._quota_resource import QUOTA_KIND, QUOTA_PLURAL, RunQuotaSpec, RunQuotaStatus
from agentrun.operator._resource import (
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    AgentRunSpec,
    AgentRunStatus,
    LeasePolicySpec,
    Resolution,
)

Schema = dict[str, Any]

COMPARED = (
    "type",
    "enum",
    "format",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
)


def crd(plural: str = PLURAL) -> Schema:
    loaded: Schema = yaml.safe_load((REPO / "crds" / f"{plural}.{GROUP}.yaml").read_text())
    return loaded


def reduce_crd(node: Schema) -> Schema:
    """The CRD schema in the compared shape; int64 is how the CRD spells a Python int."""
    out = {key: node[key] for key in COMPARED if key in node}
    if out.get("format") == "int64":
        del out["format"]
    if "properties" in node:
        out["properties"] = {name: reduce_crd(child) for name, child in node["properties"].items()}
        out["required"] = sorted(node.get("required", []))
    if "items" in node:
        out["items"] = reduce_crd(node["items"])
    return out


def reduce_model(node: Schema, defs: Schema) -> Schema:
    """A pydantic JSON schema in the compared shape: refs resolved, ``X | None`` read as X."""
    if "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[-1]]
    if "anyOf" in node:
        (present,) = [branch for branch in node["anyOf"] if branch != {"type": "null"}]
        return reduce_model(present, defs)
    out = {key: node[key] for key in COMPARED if key in node}
    if "properties" in node:
        out["properties"] = {
            name: reduce_model(child, defs) for name, child in node["properties"].items()
        }
        out["required"] = sorted(node.get("required", []))
    if "items" in node:
        out["items"] = reduce_model(node["items"], defs)
    return out


def model_schema(model: type[BaseModel]) -> Schema:
    schema = model.model_json_schema(by_alias=True)
    return reduce_model(schema, schema.get("$defs", {}))


def crd_schema(part: str, plural: str = PLURAL) -> Schema:
    (version,) = crd(plural)["spec"]["versions"]
    return reduce_crd(version["schema"]["openAPIV3Schema"]["properties"][part])


@pytest.mark.parametrize(
    ("plural", "part", "model"),
    [
        (PLURAL, "spec", AgentRunSpec),
        (PLURAL, "status", AgentRunStatus),
        (QUOTA_PLURAL, "spec", RunQuotaSpec),
        (QUOTA_PLURAL, "status", RunQuotaStatus),
    ],
)
def test_model_and_crd_schema_agree(plural: str, part: str, model: type[BaseModel]) -> None:
    from_crd, from_model = crd_schema(part, plural), model_schema(model)
    assert sorted(from_crd["properties"]) == sorted(from_model["properties"])
    assert from_crd == from_model


def test_comparison_sees_nested_bounds_and_enums() -> None:
    spec = crd_schema("spec")
    resolution = spec["properties"]["resolutions"]["items"]
    assert resolution["required"] == ["by", "callId", "outcome"]
    assert resolution["properties"]["outcome"]["enum"] == ["ran", "didNotRun"]
    conditions = crd_schema("status")["properties"]["conditions"]["items"]
    assert conditions["properties"]["lastTransitionTime"]["format"] == "date-time"
    assert model_schema(AgentRunSpec)["properties"]["leasePolicy"]["properties"]["ttlSeconds"] == {
        "type": "integer",
        "minimum": 5,
        "maximum": 3600,
    }


@pytest.mark.parametrize(("plural", "kind"), [(PLURAL, KIND), (QUOTA_PLURAL, QUOTA_KIND)])
def test_names_match_the_crd(plural: str, kind: str) -> None:
    definition = crd(plural)
    assert definition["metadata"]["name"] == f"{plural}.{GROUP}"
    assert definition["spec"]["names"]["kind"] == kind
    assert [v["name"] for v in definition["spec"]["versions"]] == [VERSION]


def test_models_repeat_the_single_object_cel_rules() -> None:
    with pytest.raises(ValidationError, match="result is required when outcome is ran"):
        Resolution.model_validate({"callId": "c", "outcome": "ran", "by": "bob"})
    with pytest.raises(ValidationError, match="result is required when outcome is ran"):
        Resolution(call_id="c", outcome="didNotRun", result="ok", by="bob")
    with pytest.raises(ValidationError, match="renewWithinSeconds must be less than ttlSeconds"):
        LeasePolicySpec(ttl_seconds=10, renew_within_seconds=10)
    assert LeasePolicySpec(ttl_seconds=10, renew_within_seconds=9).renew_within_seconds == 9


def test_models_speak_camel_case_and_refuse_unknown_fields() -> None:
    spec = AgentRunSpec.model_validate(
        {"agent": "booking", "leasePolicy": {"ttlSeconds": 30}, "suspend": False}
    )
    assert spec.lease_policy == LeasePolicySpec(ttl_seconds=30)
    assert spec.model_dump(by_alias=True, exclude_none=True) == {
        "agent": "booking",
        "leasePolicy": {"ttlSeconds": 30},
        "suspend": False,
    }
    with pytest.raises(ValidationError, match="agnet"):
        AgentRunSpec.model_validate({"agent": "booking", "agnet": "x"})
