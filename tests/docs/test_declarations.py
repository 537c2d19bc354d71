"""Every agent declaration shown in docs/providers.md is one ``AgentSpec`` accepts."""

from __future__ import annotations

import re

import pytest
import yaml

from agentrun.runner._spec import AgentSpec
from tests.docs.samples import ROOT

PAGE = ROOT / "docs" / "providers.md"
BLOCKS = re.findall(r"```yaml\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)


def test_the_page_shows_a_declaration() -> None:
    assert BLOCKS


@pytest.mark.parametrize("block", BLOCKS)
def test_a_declaration_on_the_page_is_a_valid_spec(block: str) -> None:
    spec = AgentSpec.model_validate(yaml.safe_load(block))
    assert spec.model.api_key is not None
