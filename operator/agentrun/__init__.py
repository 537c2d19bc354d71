"""agentrun: crash-safe LLM agent runs.

A run that dies mid-way carries on from where it was, and never makes a side-effecting tool call
twice. The public surface is re-exported here; the modules below are layered so that each only
imports the ones beneath it (data, then contracts, then the write side, then decisions, then the
loop), and none of them needs kopf or a Kubernetes client.
"""

from agentrun.checkpointing import (
    Checkpointer,
    CheckpointPolicy,
    CheckpointStore,
    WriteReceipt,
)
from agentrun.continuation import (
    DEFAULT_CONTINUATION,
    Authority,
    Continuation,
    ContinuationPolicy,
    continued,
)
from agentrun.errors import (
    AgentRunError,
    BudgetExceededError,
    CheckpointFormatError,
    CheckpointTooLargeError,
    ConfigurationError,
    HistoryUnavailableError,
    IndeterminateToolCallError,
    NothingCheckpointedError,
    ResumeConflictError,
    RevisionMismatchError,
    RunLeaseError,
    StaleFenceError,
    StoreUnavailableError,
)
from agentrun.frontier import (
    CHECKPOINT_FORMAT,
    Boundary,
    Checkpoint,
    PendingApproval,
    PendingCall,
    decode,
    describe,
    encode,
)
from agentrun.history import HistoryStore, load_transcript
from agentrun.idempotency import (
    Claim,
    ClaimState,
    IdempotencyRecord,
    IdempotencyStore,
    ListedRecord,
    MaskedOutcomes,
    derive_key,
    marker_key,
)
from agentrun.identifiers import MAX_ID_BYTES, MAX_KEY_BYTES
from agentrun.leases import (
    Leaseholder,
    LeasePolicy,
    LeaseStore,
    RunLease,
    default_holder,
)
from agentrun.ledger import Ledger
from agentrun.messages import BinaryPart, Message, TextPart, ToolCall, Usage
from agentrun.redaction import Masker, MaskingFilter, Redactor
from agentrun.resume import (
    CallDecision,
    CarriedRun,
    ResumePlan,
    Resumer,
    ToolDisposition,
    claim_resume,
    plan_resume,
    refuse_if_undecidable,
    release_resume,
)
from agentrun.stores.memory import (
    MemoryBackend,
    MemoryCheckpointStore,
    MemoryHistoryStore,
    MemoryIdempotencyStore,
    MemoryLeaseStore,
    MemoryLedger,
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "DEFAULT_CONTINUATION",
    "MAX_ID_BYTES",
    "MAX_KEY_BYTES",
    "AgentRunError",
    "Authority",
    "BinaryPart",
    "Boundary",
    "BudgetExceededError",
    "CallDecision",
    "CarriedRun",
    "Checkpoint",
    "CheckpointFormatError",
    "CheckpointPolicy",
    "CheckpointStore",
    "CheckpointTooLargeError",
    "Checkpointer",
    "Claim",
    "ClaimState",
    "ConfigurationError",
    "Continuation",
    "ContinuationPolicy",
    "HistoryStore",
    "HistoryUnavailableError",
    "IdempotencyRecord",
    "IdempotencyStore",
    "IndeterminateToolCallError",
    "LeasePolicy",
    "LeaseStore",
    "Leaseholder",
    "Ledger",
    "ListedRecord",
    "MaskedOutcomes",
    "Masker",
    "MaskingFilter",
    "MemoryBackend",
    "MemoryCheckpointStore",
    "MemoryHistoryStore",
    "MemoryIdempotencyStore",
    "MemoryLeaseStore",
    "MemoryLedger",
    "Message",
    "NothingCheckpointedError",
    "PendingApproval",
    "PendingCall",
    "Redactor",
    "ResumeConflictError",
    "ResumePlan",
    "Resumer",
    "RevisionMismatchError",
    "RunLease",
    "RunLeaseError",
    "StaleFenceError",
    "StoreUnavailableError",
    "TextPart",
    "ToolCall",
    "ToolDisposition",
    "Usage",
    "WriteReceipt",
    "claim_resume",
    "continued",
    "decode",
    "default_holder",
    "derive_key",
    "describe",
    "encode",
    "load_transcript",
    "marker_key",
    "plan_resume",
    "refuse_if_undecidable",
    "release_resume",
]
