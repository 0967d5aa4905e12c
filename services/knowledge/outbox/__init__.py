"""The memory outbox: run conversations captured durably and delivered to a Honcho-compatible memory service.

``MemoryOutbox`` is the service the Workspace opens on ``memory/`` (``data``, ``state``,
``cache``). Captured turns go into the JSONL outbox; the delivery engine establishes a memory
session per conversation and delivers pending records; the sweep (timer and on demand)
establishes, delivers and compacts; the recall tools search, chat and remember; forks clone a
conversation's memory session at a turn. ``HonchoClient`` speaks Honcho's v3 HTTP API to the
embedded memory service (``services.honcho``, reached through its transport) or to a real server.
"""

from .delivery import DeliveryEngine, DeliveryProgress, DeliveryResult, chunk_text
from .honcho_client import HonchoClient
from .models import (
    CaptureError,
    CorruptLedgerError,
    ForkError,
    HonchoError,
    HonchoRateLimitedError,
    HonchoRequestError,
    HonchoUnavailableError,
    OutboxError,
    OutboxSettings,
    OutboxWriteError,
    RecallToolError,
)
from .quarantine import QuarantinedLine, QuarantineError
from .service import MemoryOutbox, StartChild
from .status import ConversationStatus, OutboxStatus, PendingFork, Representation
from .stores import OutboxSnapshot, OutboxStores
from .sweep import SWEEP_TASK_NAME, SweepResult, run_sweep
from .tools import RecallTools

__all__ = [
    "MemoryOutbox",
    "StartChild",
    "OutboxSettings",
    "OutboxStores",
    "OutboxSnapshot",
    "DeliveryEngine",
    "DeliveryResult",
    "DeliveryProgress",
    "chunk_text",
    "run_sweep",
    "SweepResult",
    "SWEEP_TASK_NAME",
    "RecallTools",
    "OutboxStatus",
    "ConversationStatus",
    "PendingFork",
    "Representation",
    "HonchoClient",
    "OutboxError",
    "CaptureError",
    "OutboxWriteError",
    "CorruptLedgerError",
    "ForkError",
    "HonchoError",
    "HonchoUnavailableError",
    "HonchoRequestError",
    "HonchoRateLimitedError",
    "RecallToolError",
    "QuarantinedLine",
    "QuarantineError",
]
