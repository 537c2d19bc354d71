"""What a user imports from ``agentrun``: the headline types say what they are, and the kit's
plumbing stays in its modules, out of the public names."""

from __future__ import annotations

import inspect

import pytest

import agentrun

PUBLIC_CLASSES = sorted(
    name for name in agentrun.__all__ if inspect.isclass(getattr(agentrun, name))
)


@pytest.mark.parametrize("name", PUBLIC_CLASSES)
def test_every_public_class_says_what_it_is(name: str) -> None:
    cls = getattr(agentrun, name)
    assert (cls.__dict__.get("__doc__") or "").strip(), f"{name} has no docstring of its own"


@pytest.mark.parametrize(
    "name",
    [
        "claim_resume",
        "release_resume",
        "read_and_plan",
        "marker_key",
        "derive_key",
        "encode",
        "decode",
        "load_transcript",
        "default_holder",
        "decision_for",
    ],
)
def test_plumbing_is_not_a_public_name(name: str) -> None:
    assert name not in agentrun.__all__


def test_the_runner_and_the_backend_come_from_the_package() -> None:
    from agentrun import AgentRunner, Backend, open_backend
    from agentrun._backend import Backend as ContractBackend
    from agentrun.runner._loop import AgentRunner as LoopRunner
    from agentrun.stores import open_backend as opener

    assert (AgentRunner, Backend, open_backend) == (LoopRunner, ContractBackend, opener)
