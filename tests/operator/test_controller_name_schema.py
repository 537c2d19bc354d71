"""The chart accepts exactly the controller names the operator accepts: a name the chart lets
through but the operator refuses would install an operator that cannot start."""

from __future__ import annotations

import json
from pathlib import Path

from agentrun.operator._resource import CONTROLLER_PATTERN

SCHEMA = Path(__file__).resolve().parents[2] / "charts/agentrun-operator/values.schema.json"


def test_the_values_schema_uses_the_operators_controller_name_pattern() -> None:
    schema = json.loads(SCHEMA.read_text())
    assert schema["properties"]["controllerName"]["pattern"] == CONTROLLER_PATTERN
