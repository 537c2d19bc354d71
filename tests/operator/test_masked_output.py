"""What the operator writes for people, its events and its log, is masked with the masker its
builder hands it: the backend's, built from the run's redaction settings (here, an extra pattern
the built-in ones do not know). Nothing is swapped at start-up for everyone, and a log handler
added after start-up writes masked lines too."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import kopf
import pytest
from kopf._core.engines import posting

from agentrun._redaction import Masker
from agentrun.operator._events import notice
from agentrun.operator._lifecycle import LogMasking

SECRET = "booking-4242"
MASKER = Masker.build(["booking-[0-9]+"])
RUN = {
    "apiVersion": "agentrun.dev/v1alpha1",
    "kind": "AgentRun",
    "metadata": {"name": "run-1", "namespace": "team-a", "uid": "8b4c"},
}


async def test_an_event_is_masked_with_the_masker_its_poster_passes() -> None:
    # What kopf sets up in a running operator: its settings, and the queue its event poster
    # takes events from.
    queue: asyncio.Queue[posting.K8sEvent] = asyncio.Queue()
    posting.settings_var.set(kopf.OperatorSettings())
    posting.event_queue_loop_var.set(asyncio.get_running_loop())
    posting.event_queue_var.set(queue)
    notice(MASKER, RUN, "Tried", f"the provider quoted {SECRET}")
    notice(Masker.build(), RUN, "Tried", f"the provider quoted {SECRET}")
    assert [queue.get_nowait().message for _ in range(2)] == [
        "the provider quoted [REDACTED]",
        f"the provider quoted {SECRET}",  # another masker, another operator: not this one's
    ]


@pytest.fixture
def started() -> Iterator[LogMasking]:
    """The log masking an operator installs at start-up, removed again at shut-down."""
    masking = LogMasking(MASKER)
    masking.install()
    try:
        yield masking
    finally:
        masking.remove()


@contextmanager
def handler_on(logger: logging.Logger) -> Iterator[io.StringIO]:
    """A handler on ``logger``, added now, writing INFO and up to a buffer."""
    written = io.StringIO()
    handler = logging.StreamHandler(written)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield written
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.mark.usefixtures("started")
@pytest.mark.parametrize(
    ("name", "where"),
    [
        ("agentrun.runner._dispatch", "agentrun"),  # the kit's: a tool's output quoted
        ("kopf.objects", "kopf"),  # a run's lines, which kopf also posts as events
        ("agentrun._leases", ""),  # the root's, as kopf's own logging set-up adds them
    ],
)
def test_a_handler_added_after_start_up_writes_masked_lines(name: str, where: str) -> None:
    """Wherever the handler is: on the package's logger its records reach before the root's
    handlers, or on the root."""
    with handler_on(logging.getLogger(where or None)) as written:
        logging.getLogger(name).error("the tool answered %s", SECRET)
    assert written.getvalue() == "the tool answered [REDACTED]\n"


def test_shut_down_takes_the_masking_away_with_it(started: LogMasking) -> None:
    started.remove()
    record = logging.LogRecord("agentrun", logging.INFO, __file__, 1, SECRET, None, None)
    assert all(logger.filter(record) for logger in started.loggers)
    assert record.getMessage() == SECRET


def test_a_tools_own_logger_is_masked_at_the_handlers_present_at_start_up() -> None:
    """A tool logs through a logger of its own package: its records are masked by the root's
    handlers the operator found at start-up, and so written masked by a root handler added
    after them."""
    root = logging.getLogger()
    with handler_on(root) as at_start:
        masking = LogMasking(MASKER)
        masking.install()
        try:
            with handler_on(root) as added_later:
                logging.getLogger("a_tool.reports").error("fetched %s", SECRET)
        finally:
            masking.remove()
    assert at_start.getvalue() == added_later.getvalue() == "fetched [REDACTED]\n"
