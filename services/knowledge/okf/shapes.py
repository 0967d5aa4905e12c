"""The JSON documents of the state dir, typed: ``run.json``, receipts, ``status.json``, ``source.json``,
inputs, proposals and reports (OKF's formats, see the module docstrings of ``state`` and ``runs``).

These are ``TypedDict``s over what this package writes; a document read back from disk is trusted to
be one of ours (the state dir is written only through ``StateDir``). What a judge replies is not: it
stays a ``JsonObject`` until ``check_judgment`` has passed it, and only then is read through
``outcomes_of`` / ``removals_of``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NotRequired, Required, TypedDict, cast


__all__ = [
    "JsonObject",
    "Concept",
    "Outcome",
    "Removal",
    "JudgmentDoc",
    "outcomes_of",
    "removals_of",
    "PullRequest",
    "MergedAs",
    "Receipt",
    "Stage",
    "StagingEntry",
    "NodeEntry",
    "RunError",
    "Review",
    "HistoryEntry",
    "Worker",
    "Launch",
    "Run",
    "Captured",
    "LastCapture",
    "SkippedNote",
    "Status",
    "Source",
    "DeclDoc",
    "TurnText",
    "Turn",
    "InputPayload",
    "InputItem",
    "SourceBrief",
    "InputDoc",
    "Proposal",
    "Document",
    "LiveMemory",
    "InspectReport",
    "ViewBase",
    "View",
    "PublishedView",
    "HomeMarker",
]

JsonObject = dict[str, object]
"""A JSON object whose shape is not checked yet (a judge's reply, a run record, a ``gh`` answer)."""


# -- a judgment (judge-written; read this way only once ``check_judgment`` passed it) ---------------


class Concept(TypedDict):
    """One concept an outcome writes: ``{base, path, text}``."""

    base: str
    path: str
    text: NotRequired[str]


class Outcome(TypedDict):
    """The verdict on one input."""

    input: str
    verdict: str
    reason: str
    concepts: list[Concept]


class Removal(TypedDict):
    """A concept the judgment removes, with why."""

    base: str
    path: str
    reason: str


class JudgmentDoc(TypedDict):
    """``judgment.json`` as the deterministic judge writes it."""

    version: int
    exclusionsReviewed: bool
    outcomes: list[Outcome]
    removals: list[Removal]


def outcomes_of(judgment: Mapping[str, object] | None) -> list[Outcome]:
    """The outcomes of a judgment ``check_judgment`` accepted (its shape is then known)."""
    if judgment is None:
        raise TypeError("the run holds no judgment")
    return cast("list[Outcome]", judgment["outcomes"])


def removals_of(judgment: Mapping[str, object] | None) -> list[Removal]:
    """The removals of a judgment ``check_judgment`` accepted (none when it names none)."""
    if judgment is None:
        raise TypeError("the run holds no judgment")
    return cast("list[Removal]", judgment.get("removals", []))


# -- receipts -----------------------------------------------------------------------------------


class PullRequest(TypedDict):
    """A pull request as ``gh`` lists it (the fields ``git_pr.PR_FIELDS`` asks for)."""

    number: object
    url: object
    state: object
    headRefOid: object
    baseRefName: object
    headRefName: object
    mergedAt: object
    mergeCommit: object


class MergedAs(TypedDict):
    """The accepted-branch commit that carries a Git proposal, and how it got there."""

    commit: str
    how: str


class Receipt(TypedDict, total=False):
    """A base's receipt for a run: the directory ladder (``validated`` ... ``accepted``) or the Git one
    (``commit-intent`` ... ``delivered``, then ``accepted`` or ``rejected``)."""

    status: str
    proposal: str
    proposalHash: str
    error: str
    acceptedDigest: str
    acceptedAt: str
    branch: str
    baseHead: str
    commitAt: str
    rebased: bool
    commit: str
    pr: PullRequest | None
    review: str | None
    deliveredAt: str
    acceptedCommit: str
    mergedAs: MergedAs
    rejectedUpstream: str
    upstream: str
    """What is known when the proposal branch is gone and no matching merge was found."""
    rejectedAt: str


# -- run.json -----------------------------------------------------------------------------------


class Stage(TypedDict):
    """A base as a run staged it: where, its digest, the owned nodes, its file count (and Git head)."""

    root: str
    digest: str
    owned: list[str]
    files: int
    head: NotRequired[str]


class NodeEntry(TypedDict):
    """A node of a base descriptor: ``{path, owner}``."""

    path: str
    owner: str


class StagingEntry(TypedDict, total=False):
    """One base in ``work/staging.json`` (or a settled one: ``{settled, owned, receipt}``)."""

    root: str
    owned: list[str]
    nodes: dict[str, NodeEntry]
    baseline: str
    settled: bool
    receipt: Receipt


class RunError(TypedDict):
    """Why a run is invalid or failed."""

    code: str
    message: str
    problems: list[str]


class Review(TypedDict, total=False):
    """The queue state of a run (``models.QUEUE_STATES``) and the operator's decision."""

    state: str
    reason: str
    rejectedAt: str
    was: str
    approved: list[str]
    declined: list[str]
    whole: bool
    approvedAt: str


class HistoryEntry(TypedDict, total=False):
    """One step of a run's history."""

    status: str
    at: str
    alias: str
    attempt: int


class Worker(TypedDict):
    """Who judges a run, and where."""

    instance: str | None
    home: str | None


class Launch(TypedDict):
    """How the judge was launched."""

    kind: str
    cwd: str


class Run(TypedDict):
    """``run.json``."""

    version: int
    id: str
    source: str
    created: str
    inputs: list[str]
    status: str
    stages: dict[str, Stage]
    receipts: dict[str, Receipt]
    noLaunch: bool
    worker: Worker
    launch: Launch | None
    judgment: JsonObject | None
    settled: list[str]
    recoveryOf: str | None
    recoveryGuards: object
    attempt: int
    attemptDir: str | None
    history: list[HistoryEntry]
    error: RunError | None
    review: Review


# -- status.json --------------------------------------------------------------------------------


class Captured(TypedDict):
    """What a source has captured: note hashes, the last turn per thread, the input ids."""

    notes: list[str]
    threads: dict[str, str]
    inputs: list[str]


class SkippedNote(TypedDict):
    """A note a capture refused, with why."""

    name: str
    reason: str


class LastCapture(TypedDict, total=False):
    """How the last capture went."""

    status: str
    complete: bool
    ignored: int
    at: str
    error: str
    skipped: list[SkippedNote]


class Status(TypedDict):
    """``status.json``: the source's processing receipts."""

    version: int
    captured: Captured
    processed: list[str]
    delivered: dict[str, Receipt]
    accepted: dict[str, Receipt]
    retired: bool
    auto: bool
    activeRun: str | None
    lastCapture: NotRequired[LastCapture]
    skippedNotes: NotRequired[list[SkippedNote]]


# -- source.json and inputs -----------------------------------------------------------------------


class DeclDoc(TypedDict):
    """``soul/okf.json`` as a source froze it."""

    version: int
    owner: str
    owns: list[str]
    reads: list[str]


class Source(TypedDict):
    """``source.json``: the frozen descriptor of a registered home."""

    version: int
    id: str
    home: str
    work: str
    context: str
    agent: str
    instance: str
    owner: str
    decl: DeclDoc
    role: str
    bindings: JsonObject
    bindingFingerprint: str
    execution: JsonObject
    created: str
    acceptedView: View | None
    acceptedNodes: list[str]


class TurnText(TypedDict):
    """One part of a turn: who said it and what."""

    role: str
    text: str


class Turn(TypedDict):
    """One turn of a captured run record."""

    id: str
    ts: str
    thread: str
    kind: str
    source: str
    text: list[TurnText]


class InputPayload(TypedDict, total=False):
    """``inputs/<sha256>.json``: a note (``name``, ``contentHash``, ``text``) or a record window
    (``thread``, ``after``, ``until``, ``turns``)."""

    version: int
    kind: str
    name: str
    contentHash: str
    text: str
    thread: str
    after: str | None
    until: str
    turns: list[Turn]


class InputItem(InputPayload, total=False):
    """One input as ``work/input.json`` hands it to the judge: its payload and its id."""

    id: Required[str]


class SourceBrief(TypedDict):
    """Who a run's inputs come from, as ``work/input.json`` says."""

    id: str
    owner: str
    agent: str
    role: str


class InputDoc(TypedDict):
    """``work/input.json``: the run's inputs and what the source owns and reads."""

    version: int
    source: SourceBrief
    inputs: list[InputItem]
    owns: list[str]
    reads: list[str]


# -- proposals ----------------------------------------------------------------------------------


class Proposal(TypedDict):
    """``<alias>-proposal.json``: both digests, every file's hash before, the changed files only."""

    version: int
    run: str
    attempt: int
    created: str
    file: str
    beforeDigest: str
    afterDigest: str
    changed: list[str]
    beforeFiles: dict[str, str]
    before: dict[str, str]
    after: dict[str, str]


# -- views and inspection -----------------------------------------------------------------------


class ViewBase(TypedDict):
    """One base inside a knowledge view."""

    path: str
    id: str
    digest: str
    head: str | None
    nodes: dict[str, NodeEntry]


class View(TypedDict):
    """``knowledge/view.json``."""

    version: int
    at: str
    bases: dict[str, ViewBase]
    owns: list[str]
    reads: list[str]


class PublishedView(View):
    """A view as ``refresh`` answers it: ``view.json`` and the folder it was published in."""

    path: str


class HomeMarker(TypedDict):
    """``<home>/.okf-source.json``: which source a home is."""

    version: int
    id: str
    source: str


class Document(TypedDict, total=False):
    """One document an inspection shows (a preview, cut at 256 KiB)."""

    label: str
    kind: str
    path: str
    text: str
    truncated: bool
    bytes: int


class LiveMemory(TypedDict, total=False):
    """Whether the home's live memory can be read, and why not."""

    available: bool
    reason: str
    observedAt: str
    error: str


class InspectReport(TypedDict, total=False):
    """What ``inspect`` answers about a source."""

    summary: str
    source: str
    owns: list[str]
    reads: list[str]
    bases: object
    authority: JsonObject
    acceptedView: View | None
    status: Status
    scheduler: object
    liveMemory: LiveMemory
    documents: list[Document]
