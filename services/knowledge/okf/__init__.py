"""OKF knowledge: accepted directory and Git bases, instance homes, the durable state dir, capture, judging, the approval queue and delivery.

``Harvest`` is the service the Workspace opens on its ``knowledge/`` folder; the other names are
the pieces it is built from (usable alone: the bundle validator, the judgment validator, the
deterministic judge, the directory provider, the notes watcher, inspection).
"""

from .bases import DirectoryBase, init_directory_base, init_git_proposal
from .bundle import Finding, validate_bundle, validate_tree
from .cloud_judge import CrouterJudgeClient, JudgeRunError
from .capture import CaptureReport, capture_notes, capture_record
from .delivery import DeliveryProvider, DirectoryProvider, RecoveryOutcome
from .descriptors import BaseDescriptor, Bindings, DirectoryBinding, GitBinding, NodeDecl, SoulDecl, load_bindings, load_soul, parse_base_descriptor, parse_bindings, parse_soul
from .errors import (BaselineError, CaptureError, ConfirmError, OkfConfigError, OkfError, OkfPathError,
                     OkfValidationError, PublicationInterrupted, RecoveryError, RunStateError, SourceError, ViewError)
from .git import GitBase, GitCommandError
from .git_acceptance import POLL_INTERVAL_S
from .git_delivery import GitProvider
from .git_pr import PullRequests
from .harvest import Harvest
from .home import InstanceHome
from .inspect import PREVIEW_CAP, inspect_source, preview_file
from .judge import FixedReplyJudgeClient, JudgeClient, LocalJudgeClient, build_prompt, deterministic_judge_reply, judge_documents, parse_prompt
from .judgment import JudgmentCheck, check_judgment
from .limits import MAX_CONCEPT_BYTES, MAX_DEPTH, MAX_JUDGMENT_BYTES, PathLimits
from .models import NOTICE_KINDS, QUEUE_STATES, AcceptedReceipt, GitDelivery, JudgmentDetail, JudgmentItem, OkfNotice, OutcomeView, ReadResult, SourceInfo
from .proposal import FileChange
from .state import StateDir
from .watcher import Debouncer, NotesWatcher

__all__ = [
    "Harvest", "JudgeClient", "LocalJudgeClient", "FixedReplyJudgeClient", "CrouterJudgeClient", "JudgeRunError", "deterministic_judge_reply",
    "judge_documents", "build_prompt", "parse_prompt", "check_judgment", "JudgmentCheck",
    "QUEUE_STATES", "AcceptedReceipt", "JudgmentItem", "JudgmentDetail", "OutcomeView", "FileChange", "SourceInfo", "ReadResult",
    "NOTICE_KINDS", "OkfNotice", "MAX_JUDGMENT_BYTES", "MAX_CONCEPT_BYTES", "MAX_DEPTH", "PathLimits",
    "DirectoryBase", "init_directory_base", "init_git_proposal", "GitBase", "GitCommandError", "GitProvider",
    "PullRequests", "POLL_INTERVAL_S", "GitDelivery", "Finding", "validate_bundle", "validate_tree",
    "CaptureReport", "capture_notes", "capture_record", "DeliveryProvider", "DirectoryProvider", "RecoveryOutcome",
    "Bindings", "DirectoryBinding", "GitBinding", "BaseDescriptor", "NodeDecl", "SoulDecl", "load_bindings",
    "load_soul", "parse_bindings", "parse_soul", "parse_base_descriptor", "InstanceHome", "StateDir",
    "PREVIEW_CAP", "inspect_source", "preview_file", "Debouncer", "NotesWatcher",
    "OkfError", "OkfConfigError", "OkfPathError", "OkfValidationError", "BaselineError",
    "ConfirmError", "RecoveryError", "PublicationInterrupted", "ViewError", "CaptureError", "RunStateError", "SourceError",
]
