"""Exit codes, which are what a script reads, and the errors that map to them."""

from __future__ import annotations

from enum import IntEnum

from agentrun.errors import (
    AgentRunError,
    CheckpointFormatError,
    ConfigurationError,
    HistoryUnavailableError,
    IndeterminateToolCallError,
    NothingCheckpointedError,
    ResumeConflictError,
    RevisionMismatchError,
    RunLeaseError,
)


class Exit(IntEnum):
    CARRIED_ON = 0
    NOTHING_CHECKPOINTED = 1
    USAGE = 2
    HELD_ELSEWHERE = 3
    MUST_NOT_CARRY_ON = 4
    STORE_FAILED = 5


EXIT_HELP = """exit codes:
  0  carried on (or, for inspect and the people commands: done)
  1  nothing is checkpointed under that run id for that tenant
  2  a command line it could not read
  3  another worker holds the run's lease (it is named)
  4  the run must not be carried on: an undecidable tool call, an evicted transcript,
     a frontier this kit cannot read, or an agent whose revision changed
  5  a store could not be reached or failed (retry when it is back)"""


def exit_for(error: AgentRunError) -> Exit:
    if isinstance(error, NothingCheckpointedError):
        return Exit.NOTHING_CHECKPOINTED
    if isinstance(error, ConfigurationError):
        return Exit.USAGE
    if isinstance(error, RunLeaseError | ResumeConflictError):
        return Exit.HELD_ELSEWHERE
    if isinstance(
        error,
        IndeterminateToolCallError
        | HistoryUnavailableError
        | CheckpointFormatError
        | RevisionMismatchError,
    ):
        return Exit.MUST_NOT_CARRY_ON
    return Exit.STORE_FAILED
