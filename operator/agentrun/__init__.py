"""agentrun: crash-safe LLM agent runs.

A run that dies mid-way carries on from where it was, and never makes a side-effecting tool call
twice. What a user imports is re-exported here: ``AgentRunner`` and what it runs (agents, tools,
providers), ``open_backend`` and the ``Backend`` it returns, the store contracts a third-party
store implements, the errors, and people's decisions. Plumbing the kit uses internally
(``claim_resume``, ``marker_key``, ``encode``, ...) stays in its module. Importing this package
imports no cluster client and no store driver: ``open_backend`` imports a driver only for a URL
that needs it.
"""

from agentrun._backend import Backend, CheckpointStore
from agentrun._checkpointing import Checkpointer, CheckpointPolicy, WriteReceipt
from agentrun._continuation import (
    DEFAULT_CONTINUATION,
    Continuation,
    ContinuationPolicy,
    continued,
)
from agentrun._decisions import ApprovalDecision, decide, resolve
from agentrun._errors import (
    AgentRunError,
    BudgetExceededError,
    CheckpointEncodingError,
    CheckpointFormatError,
    CheckpointTooLargeError,
    ConfigurationError,
    HistoryUnavailableError,
    IndeterminateToolCallError,
    NothingCheckpointedError,
    QuotaSpentError,
    ResumeConflictError,
    RevisionMismatchError,
    RunLeaseError,
    StaleFenceError,
    StoreUnavailableError,
)
from agentrun._frontier import (
    CHECKPOINT_FORMAT,
    Boundary,
    Checkpoint,
    PendingApproval,
    PendingCall,
    describe,
)
from agentrun._history import HistoryStore, SegmentForm
from agentrun._idempotency import (
    Claim,
    ClaimState,
    IdempotencyRecord,
    IdempotencyStore,
    ListedRecord,
)
from agentrun._identifiers import MAX_ID_BYTES, MAX_KEY_BYTES
from agentrun._leases import Leaseholder, LeasePolicy, LeaseStore, RunLease
from agentrun._ledger import Ledger
from agentrun._messages import BinaryPart, Message, ModelCall, TextPart, ToolCall, Usage
from agentrun._quotas import Allowance, QuotaStore, Spend, Spending
from agentrun._redaction import Masker, MaskingFilter, Redactor
from agentrun._resume import (
    CallDecision,
    CarriedRun,
    ResumePlan,
    Resumer,
    ToolDisposition,
    plan_resume,
    refuse_if_undecidable,
)
from agentrun.runner import (
    AgentDefinition,
    AgentRunner,
    ModelReply,
    PriceTable,
    Provider,
    RunResult,
    RunStatus,
    ScriptedProvider,
    Tool,
    ToolError,
    tool,
)
from agentrun.runner._registry import RegisteredAgent
from agentrun.stores import open_backend
from agentrun.stores._memory import (
    MemoryBackend,
    MemoryCheckpointStore,
    MemoryHistoryStore,
    MemoryIdempotencyStore,
    MemoryLeaseStore,
    MemoryLedger,
    MemoryQuotaStore,
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "DEFAULT_CONTINUATION",
    "MAX_ID_BYTES",
    "MAX_KEY_BYTES",
    "AgentDefinition",
    "AgentRunError",
    "AgentRunner",
    "Allowance",
    "ApprovalDecision",
    "Backend",
    "BinaryPart",
    "Boundary",
    "BudgetExceededError",
    "CallDecision",
    "CarriedRun",
    "Checkpoint",
    "CheckpointEncodingError",
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
    "Masker",
    "MaskingFilter",
    "MemoryBackend",
    "MemoryCheckpointStore",
    "MemoryHistoryStore",
    "MemoryIdempotencyStore",
    "MemoryLeaseStore",
    "MemoryLedger",
    "MemoryQuotaStore",
    "Message",
    "ModelCall",
    "ModelReply",
    "NothingCheckpointedError",
    "PendingApproval",
    "PendingCall",
    "PriceTable",
    "Provider",
    "QuotaSpentError",
    "QuotaStore",
    "Redactor",
    "RegisteredAgent",
    "ResumeConflictError",
    "ResumePlan",
    "Resumer",
    "RevisionMismatchError",
    "RunLease",
    "RunLeaseError",
    "RunResult",
    "RunStatus",
    "ScriptedProvider",
    "SegmentForm",
    "Spend",
    "Spending",
    "StaleFenceError",
    "StoreUnavailableError",
    "TextPart",
    "Tool",
    "ToolCall",
    "ToolDisposition",
    "ToolError",
    "Usage",
    "WriteReceipt",
    "continued",
    "decide",
    "describe",
    "open_backend",
    "plan_resume",
    "refuse_if_undecidable",
    "resolve",
    "tool",
]
