"""The recording file: versioned JSON Lines, written line by line and validated whole on load.

A recording is one JSON object per line:

1. the header: ``{"format": "workbench-recording", "version": 1, "started_at": ISO, "client_id",
   "source": "embedded" | "attached"}``;
2. the cloud's state before the first step: ``{"type": "state", "state": {...}}`` (the served state
   export, ``services.cloud.state.export_state``, with every secret taken out: ``scrub_state``);
3. one line per step, in order: ``{"type": "step", "n", "at", "kind", ..., "observed"}`` where ``at``
   is seconds since the start and ``kind`` one of ``STEP_KINDS``:

   - ``operator``: a control call the desk made (``method``, ``path``, ``body``, ``status``,
     ``error``: the refusal's code or null, ``made``: the run it started or null);
   - ``failure``: a scripted failure (the control call ``POST /fail_next``, same fields);
   - ``app``: a call an app made on the cloud (``user``, ``op``, ``method``, ``path``, ``query``,
     ``body``, ``key``: its idempotency key, ``status``, ``made``);
   - ``insight``: an insight review decided (``action``: approve or reject, ``title``, ``candidate``,
     ``text``, ``reason``);
   - ``okf``: an OKF harvest judgment decided (``action``: approve or reject; the judgment named by
     what it judged, not by its random id: ``agent``, the source's agent, and ``inputs``, each input
     as ``note:<note name>`` or ``record:<run id>``; ``attempt``; ``targets``: the ``<base>/<path>``
     its outcomes write; ``outcomes``: the inputs whose outcomes were approved one by one, or null for
     the whole judgment; ``reason``: a rejection's reason);

   ``observed`` is what the cloud showed right after the step (``observe.observe``): every run in
   start order with its status and its events' types, every grant's state, every insight review's
   status, and (when the workspace had them) every OKF judgment's ``{"agent", "inputs", "state"}``
   (``pending``, ``approved``, ``rejected``, ``delivered`` ...; a recording without the key did not
   observe them); or null when it was too large to keep. After the first, an observation is written as
   what changed (``delta``): ``{"delta": true, "base": the step whose observation it changes (the last
   one written), "ids": [every run id, in order; only when a run came or went], "runs": [the runs that
   changed, a run whose events only grew carrying the new ones and ``after``: how many it had],
   "grants", "insights", "judgments"}``; ``load`` expands it again, so a loaded step's ``observed`` is
   whole. Steps are numbered from 1 as written (``n``); ``load`` refuses a gap, a step out of order and
   an observation whose ``base`` is not the last one held: a lost line is named, never skipped.
4. ``{"type": "end", "at", "steps"}`` when the recording was stopped cleanly; ``steps`` is compared
   with the steps read. A file without it loads (a window that stopped while recording), and
   ``replay`` and ``export-test`` refuse it (``Recording.check_complete``).

Text from outside (prompts, replies, messages, event fields) is stored as data, never as markup or
code: ``load`` refuses a file whose *structural* fields (kinds, methods, paths, ops, users) carry
anything but plain identifiers, so nothing from a recording is ever drawn as markup or written into
an exported test as code. Limits (``MAX_*``) bound every line, the nesting and the number of steps.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal, NotRequired, Required, TypedDict, cast

from ..errors import ServiceError
from ..files import CorruptFileError, json_deeper_than, open_regular
from ..text import value_problem

__all__ = [
    "FORMAT",
    "VERSION",
    "STEP_KINDS",
    "MAX_LINE_BYTES",
    "MAX_STATE_BYTES",
    "MAX_DEPTH",
    "MAX_STEPS",
    "REDACTED",
    "Recording",
    "RecordingError",
    "Header",
    "StateLine",
    "EndLine",
    "ObservedRun",
    "ObservedJudgment",
    "Observation",
    "ObservationDelta",
    "StepFields",
    "Step",
    "StepLine",
    "JsonObject",
    "load_recording",
    "parse_recording",
    "dump_line",
    "scrub",
    "scrub_fields",
    "scrub_state",
    "fields",
    "items",
]

FORMAT = "workbench-recording"
"""The header's ``format``."""
VERSION = 1
"""The newest version this build reads and the one it writes."""
STEP_KINDS = ("operator", "failure", "app", "insight", "okf")
"""What a step may be."""
MAX_LINE_BYTES = 4 * 1024 * 1024
"""The longest step line (a step whose observation would be longer is written without it)."""
MAX_STATE_BYTES = 64 * 1024 * 1024
"""The longest state line."""
MAX_DEPTH = 64
"""The deepest nesting of objects and lists in any line."""
MAX_STEPS = 100_000
"""The most steps one recording holds."""
REDACTED = "<redacted>"
"""What a secret is replaced with."""

_IDENT = re.compile(r"^[A-Za-z0-9_.:@/%+=-]{0,400}$")
_SECRET_KEYS = frozenset({
    "access_token", "refresh_token", "id_token", "token", "client_secret", "secret", "password",
    "authorization", "api_key", "apikey", "private_key", "pem", "assertion", "client_assertion", "bearer",
})
_SECRET_TEXT = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----|^eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.")


JsonObject = dict[str, object]
"""A JSON object whose fields are not known here (a call's body or query, the cloud's state)."""


class Header(TypedDict):
    """The first line."""

    format: str
    version: int
    source: NotRequired[str]
    """``embedded`` or ``attached``."""
    client_id: NotRequired[str]
    started_at: NotRequired[str]
    """ISO 8601, UTC, whole seconds."""


class StateLine(TypedDict):
    """The second line: the cloud's state before the first step, without secrets."""

    type: Literal["state"]
    state: JsonObject


class EndLine(TypedDict):
    """The last line of a recording stopped cleanly."""

    type: Literal["end"]
    at: float
    steps: int


class ObservedRun(TypedDict):
    """One run as an observation shows it."""

    id: str
    user: str
    status: str
    deleted: bool
    events: list[str]
    """Its events' types, in order."""
    after: NotRequired[int]
    """Only in an observation written as changes: how many events the run had before these."""


class ObservedJudgment(TypedDict):
    """One OKF harvest judgment as an observation shows it: named by what it judged."""

    agent: str
    """The agent of the source whose inputs it judged."""
    inputs: list[str]
    """Its inputs, each ``note:<note name>`` or ``record:<run id>``, sorted."""
    state: str
    """``pending``, ``approved``, ``rejected``, ``delivered``, ``invalid`` ..."""


class Observation(TypedDict):
    """What the cloud showed after a step (whole)."""

    runs: list[ObservedRun]
    grants: dict[str, str | None]
    """Person -> the state of their grant (None: none)."""
    insights: list[list[str]]
    """Every insight review's ``[title, status]``."""
    judgments: NotRequired[list[ObservedJudgment]]
    """Every OKF judgment, sorted (absent: not observed)."""


class ObservationDelta(TypedDict):
    """An observation as written after the first: what changed since the last one written."""

    delta: Literal[True]
    base: NotRequired[int]
    """The step whose observation this one changes (the last one written before it)."""
    ids: NotRequired[list[str]]
    """Every run id, in start order, when a run came or went since (absent: the same runs)."""
    runs: list[ObservedRun]
    grants: dict[str, str | None]
    insights: list[list[str]]
    judgments: NotRequired[list[ObservedJudgment]]


class StepFields(TypedDict, total=False):
    """What a step did, by kind (``operator``/``failure``: method .. made; ``app``: user .. made;
    ``insight``: action .. reason; ``okf``: action, agent .. outcomes, reason)."""

    kind: Required[str]
    method: str
    path: str
    body: JsonObject | None
    status: int | None
    error: str | None
    made: str | None
    user: str | None
    op: str | None
    query: JsonObject
    key: str | None
    action: str
    title: str
    candidate: int | None
    text: str | None
    reason: str | None
    agent: str
    inputs: list[str]
    attempt: int
    targets: list[str]
    outcomes: list[str] | None


class Step(StepFields, total=False):
    """A step line as loaded (its observation whole again), or folded by ``sdk_calls.attempts``."""

    type: Required[str]
    n: Required[int]
    at: Required[float]
    observed: Required[Observation | None]
    attempts: int
    """Folded: how many times an app made the call (the SDK's own retries)."""
    last_n: int
    """Folded: the step number of the last attempt."""


class StepLine(StepFields, total=False):
    """A step line as written: its observation whole (the first) or as what changed (``delta``),
    or null when it was too large to keep."""

    type: Required[str]
    n: Required[int]
    at: Required[float]
    observed: Required[Observation | ObservationDelta | None]


class RecordingError(ServiceError):
    """A recording that cannot be read or written: says the line and the reason."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.line = line
        """The 1-based line the problem is on (None: the file as a whole)."""
        self.reason = message
        """The problem, without the line number."""


@dataclass
class Recording:
    """A recording as loaded: its header, the cloud's starting state and its steps."""

    header: Header
    state: JsonObject
    steps: list[Step] = field(default_factory=list)
    ended: bool = False
    """True when the file ends with an ``end`` line (stopped cleanly)."""

    def check_complete(self) -> None:
        """``RecordingError`` unless the file ended with its end line (a recording whose window stopped
        or crashed while it was written, or that lost its last lines, promises nothing about its end)."""
        if not self.ended:
            raise RecordingError(f"the recording has no end line: it was not stopped cleanly or lost its last "
                                 f"lines ({len(self.steps)} steps read); nothing can say that every step is there")

    @property
    def version(self) -> int:
        return int(self.header["version"])

    def lines(self) -> list[str]:
        """The recording as the lines of its file."""
        state: StateLine = {"type": "state", "state": self.state}
        out = [dump_line(self.header), dump_line(state)]
        out.extend(dump_line(step) for step in self.steps)
        if self.ended:
            end: EndLine = {"type": "end", "at": self.steps[-1]["at"] if self.steps else 0.0, "steps": len(self.steps)}
            out.append(dump_line(end))
        return out


def dump_line(value: Mapping[str, object]) -> str:
    """One line of the file (ASCII only: hostile text cannot reach a terminal that prints the file)."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), sort_keys=False)


# -- observations ---------------------------------------------------------------------------------


def _expand(base: Observation | None, written: JsonObject, number: int) -> Observation:
    """A written observation (validated by ``_observed``) made whole again (``delta`` undone)."""
    if not written.get("delta"):
        return cast(Observation, written)
    if base is None:
        raise RecordingError("the observation is written as changes, and no whole one comes before it", line=number)
    observed = cast(ObservationDelta, written)
    ids = observed.get("ids", [r["id"] for r in base["runs"]])  # absent: the same runs as before
    if not isinstance(ids, list):
        raise RecordingError("an observation written as changes lists every run id (ids) or none", line=number)
    known = {r["id"]: r for r in base["runs"]}
    for run in observed["runs"]:
        if "after" in run:
            before = known.get(run["id"])
            after = run["after"]
            if before is None or isinstance(after, bool) or after != len(before["events"]):
                raise RecordingError(f"run {run['id']} grows from {after!r} events, and it had "
                                     f"{len(before['events']) if before else 'none'}", line=number)
            run = run.copy()
            del run["after"]
            run["events"] = before["events"] + run["events"]
        known[run["id"]] = run
    listed = set(ids)
    stray = [r["id"] for r in observed["runs"] if r["id"] not in listed]
    if stray:
        raise RecordingError(f"run {_shown(stray[0])} is observed, and not listed among the runs (ids)", line=number)
    missing = [i for i in ids if i not in known]
    if missing:
        raise RecordingError(f"run {_shown(missing[0])} is listed, and its observation is not held", line=number)
    whole: Observation = {"runs": [known[i] for i in ids], "grants": observed.get("grants", {}),
                          "insights": observed.get("insights", [])}
    if "judgments" in observed:
        whole["judgments"] = observed["judgments"]
    return whole


# -- secrets ------------------------------------------------------------------------------------


def scrub(value: object) -> object:
    """``value`` with every secret replaced by ``REDACTED``: fields named like a token, key or
    password, and text that is a private key or a signed token."""
    if isinstance(value, dict):
        return {k: (REDACTED if isinstance(k, str) and k.lower() in _SECRET_KEYS and v is not None
                    else scrub(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, str) and _SECRET_TEXT.search(value):
        return REDACTED
    return value


def scrub_fields(value: Mapping[str, object]) -> JsonObject:
    """``scrub`` of a JSON object (the same object back, its secrets replaced)."""
    return {k: (REDACTED if k.lower() in _SECRET_KEYS and v is not None else scrub(v)) for k, v in value.items()}


def fields(value: object) -> JsonObject:
    """A copy of ``value`` when it is a JSON object, else an empty one (a field that is absent or null)."""
    return dict(value) if isinstance(value, dict) else {}


def items(value: object) -> list[object]:
    """``value`` when it is a JSON list, else an empty one (a field that is absent or null)."""
    return value if isinstance(value, list) else []


def scrub_state(state: Mapping[str, object]) -> JsonObject:
    """A state export without its secrets: the signing key, refresh tokens and the pinned client key
    go (a replay takes its own cloud's); people, grants, runs, events and memory stay."""
    doc = dict(state)
    meta = fields(doc.get("meta"))
    signing = fields(meta.get("signing_key"))
    meta["signing_key"] = {"pem": REDACTED, "kid": str(signing.get("kid", ""))}
    meta["client_jwk"] = None
    doc["meta"] = meta
    users: list[object] = []
    for found in items(doc.get("users")):
        user = fields(found)
        user["refresh_token"] = None
        user["superseded"] = []
        users.append(user)
    doc["users"] = users
    doc["refresh_tokens"] = {}
    return scrub_fields(doc)


# -- loading ------------------------------------------------------------------------------------


def load_recording(path: Path | str) -> Recording:
    """Read and validate a recording file; ``RecordingError`` names the line and the reason."""
    path = Path(path)
    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_STATE_BYTES + MAX_STEPS * 64 * 1024:
                raise RecordingError(f"{path} is {size} bytes, more than a recording may be")
            recording: Recording = parse_recording(_bounded_lines(handle))
            return recording
    except CorruptFileError as exc:  # not a regular file (a device, a FIFO, a folder)
        raise RecordingError(f"{path} cannot be read: {exc}") from None
    except OSError as exc:
        raise RecordingError(f"{path} cannot be read: {exc.strerror or exc}") from None


def _bounded_lines(handle: BinaryIO) -> Iterator[bytes]:
    """The file's lines, none read past the longest a line may be (plus one byte, so
    ``parse_recording`` sees it is too long): a line with no end is never read whole."""
    while line := handle.readline(MAX_STATE_BYTES + 1):
        yield line


def parse_recording(lines: Iterable[bytes | str]) -> Recording:
    """Validate a recording's lines (bytes or text, with or without newlines)."""
    header: Header | None = None
    state: JsonObject | None = None
    steps: list[Step] = []
    ended = False
    number = 0
    base: Observation | None = None
    base_n = 0
    """The step whose observation ``base`` is (an observation written as changes names it)."""
    for number, raw in enumerate(lines, start=1):
        limit = MAX_STATE_BYTES if number == 2 else MAX_LINE_BYTES
        if len(raw) > limit:
            raise RecordingError(f"the line is {len(raw)} bytes, more than the limit of {limit}", line=number)
        if isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise RecordingError("the line is not UTF-8", line=number) from None
        else:
            text = raw
        if not text.strip():
            raise RecordingError("the line is empty", line=number)
        if ended:
            raise RecordingError("nothing may follow the end line", line=number)
        value = _json(text, number)
        if number == 1:
            header = _header(value, number)
        elif number == 2:
            state = _state(value, number)
        else:
            kind = value.get("type")
            if kind == "end":
                _end(value, number, len(steps))
                ended = True
                continue
            if kind != "step":
                raise RecordingError(f"a line is a step or the end, not {_shown(kind)}", line=number)
            if len(steps) >= MAX_STEPS:
                raise RecordingError(f"more than {MAX_STEPS} steps", line=number)
            step = _step(value, number, len(steps) + 1)
            written = value.get("observed")
            if isinstance(written, dict):  # validated by _step
                if written.get("delta") and "base" in written and written["base"] != base_n:
                    raise RecordingError(f"the observation is written as changes since step {_shown(written['base'])}, "
                                         f"and the last observation held is step {base_n}: a line is missing",
                                         line=number)
                step["observed"] = base = _expand(base, written, number)
                base_n = step["n"]
            steps.append(step)
    if header is None:
        raise RecordingError("the file is empty: a recording starts with its header")
    if state is None:
        raise RecordingError("the cloud's starting state is missing", line=number + 1)
    return Recording(header, state, steps, ended)


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text[:40]} is too large a number")
    return value


def _end(value: JsonObject, number: int, steps: int) -> None:
    """The end line: its step count is the number of steps read (a step line lost is named here)."""
    count = value.get("steps")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise RecordingError(f"the end line counts the steps (steps), not {_shown(count)}", line=number)
    if count != steps:
        raise RecordingError(f"the end line counts {count} steps, and {steps} were read: "
                             f"{'a step line is missing' if count > steps else 'a step line was added'}", line=number)
    at = value.get("at", 0)
    if isinstance(at, bool) or not isinstance(at, (int, float)) or at < 0:
        raise RecordingError(f"the end line's time (at) is seconds from the start, not {_shown(at)}", line=number)


def _json(text: str, number: int) -> JsonObject:
    if json_deeper_than(text.encode("utf-8", "surrogatepass"), MAX_DEPTH):
        raise RecordingError(f"nested deeper than {MAX_DEPTH}", line=number)
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise RecordingError(f"nested deeper than {MAX_DEPTH}", line=number) from None
    except ValueError as exc:
        raise RecordingError(f"damaged: not JSON ({exc})", line=number) from None
    if not isinstance(value, dict):
        raise RecordingError("damaged: a line is a JSON object", line=number)
    depth = _depth(value)
    if depth > MAX_DEPTH:
        raise RecordingError(f"nested {depth} deep, deeper than {MAX_DEPTH}", line=number)
    problem = value_problem(value)
    if problem is not None:
        raise RecordingError(f"holds text no store can keep: {problem}", line=number)
    return value


def _depth(value: object) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in item)
    return deepest


def _header(value: JsonObject, number: int) -> Header:
    if value.get("format") != FORMAT:
        raise RecordingError(f"not a workbench recording (format {_shown(value.get('format'))})", line=number)
    version = value.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise RecordingError(f"the version must be a whole number from 1, not {_shown(version)}", line=number)
    if version > VERSION:
        raise RecordingError(f"version {version} is newer than this workbench reads ({VERSION}); "
                             "update the workbench to replay it", line=number)
    for name in ("client_id", "source", "started_at"):
        _ident(value, name, number, required=False)
    return cast(Header, value)  # the fields a header holds are the ones checked above


def _state(value: JsonObject, number: int) -> JsonObject:
    from ..cloud.state import state_problem

    state = value.get("state")
    if value.get("type") != "state" or not isinstance(state, dict):
        raise RecordingError("the second line is the cloud's starting state ({\"type\": \"state\", ...})",
                             line=number)
    problem = state_problem(state)
    if problem is not None:
        raise RecordingError(f"the starting state does not fit: {problem}", line=number)
    for user in state.get("users") or []:
        _ident(user, "id", number)
    for run in state.get("runs") or []:
        _ident(run, "id", number)
        _ident(run, "user_id", number)
    return dict(state)


_STEP_FIELDS: dict[str, tuple[str, ...]] = {
    "operator": ("method", "path"),
    "failure": ("method", "path"),
    "app": ("op", "method", "path"),
    "insight": ("action",),
    "okf": ("action", "agent"),
}


def _step(value: JsonObject, number: int, n: int) -> Step:
    kind = value.get("kind")
    if not isinstance(kind, str) or kind not in STEP_KINDS:
        raise RecordingError(f"a step's kind is one of {', '.join(STEP_KINDS)}, not {_shown(kind)}", line=number)
    at = value.get("at")
    if isinstance(at, bool) or not isinstance(at, (int, float)) or at < 0:
        raise RecordingError(f"a step's time (at) is seconds from the start, not {_shown(at)}", line=number)
    for name in _STEP_FIELDS[kind]:
        _ident(value, name, number)
    for name in ("user", "made", "error", "key"):
        _ident(value, name, number, required=False)
    if kind in ("operator", "failure", "app"):
        status = value.get("status")
        if status is not None and (isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599):
            raise RecordingError(f"a step's status is an HTTP status, not {_shown(status)}", line=number)
        if value.get("body") is not None and not isinstance(value.get("body"), dict):
            raise RecordingError("a step's body is a JSON object", line=number)
    if kind == "insight":
        if value.get("action") not in ("approve", "reject"):
            raise RecordingError(f"an insight step approves or rejects, not {_shown(value.get('action'))}", line=number)
        if not isinstance(value.get("title"), str):
            raise RecordingError("an insight step names its review's title", line=number)
    if kind == "okf":
        _okf_step(value, number)
    written_n = value.get("n")
    if isinstance(written_n, bool) or not isinstance(written_n, int):
        raise RecordingError(f"a step's number (n) is a whole number, not {_shown(written_n)}", line=number)
    if written_n != n:
        raise RecordingError(f"step {written_n} comes where step {n} was due: "
                             f"{'a step line is missing' if written_n > n else 'the steps are out of order'}",
                             line=number)
    observed = value.get("observed")
    if observed is not None:
        _observed(observed, number)
    return cast(Step, value)  # the fields a step holds are the ones checked above


_INPUT = re.compile(r"^(note|record):.")


def _inputs(value: object, what: str, number: int) -> list[str]:
    """A list of judged inputs (``note:<name>`` / ``record:<run id>``)."""
    if not isinstance(value, list) or not all(isinstance(i, str) and _INPUT.match(i) for i in value):
        raise RecordingError(f"{what} is a list of inputs, each note:<name> or record:<run id>, not {_shown(value)}",
                             line=number)
    for item in value:
        if item.startswith("record:"):
            _ident({"run": item[len("record:"):]}, "run", number)
    return value


def _okf_step(value: JsonObject, number: int) -> None:
    """An OKF judgment's decision: what it approves or rejects, and the judgment named by its inputs."""
    action = value.get("action")
    if action not in ("approve", "reject"):
        raise RecordingError(f"an okf step approves or rejects, not {_shown(action)}", line=number)
    inputs = _inputs(value.get("inputs"), "an okf step's inputs", number)
    if not inputs:
        raise RecordingError("an okf step names the inputs of its judgment (inputs is empty)", line=number)
    attempt = value.get("attempt", 1)
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise RecordingError(f"an okf step's attempt is a whole number from 1, not {_shown(attempt)}", line=number)
    targets = value.get("targets", [])
    if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
        raise RecordingError(f"an okf step's targets are a list of paths, not {_shown(targets)}", line=number)
    outcomes = value.get("outcomes")
    if outcomes is not None:
        if action != "approve":
            raise RecordingError("only an approval names outcomes (a rejection rejects the whole judgment)",
                                 line=number)
        chosen = _inputs(outcomes, "an okf step's outcomes", number)
        stray = [o for o in chosen if o not in inputs]
        if not chosen or stray:
            raise RecordingError(f"an okf step's outcomes are some of its inputs, not {_shown(stray or chosen)}",
                                 line=number)
    reason = value.get("reason")
    if action == "reject" and (not isinstance(reason, str) or not reason.strip()):
        raise RecordingError("an okf rejection says why (reason)", line=number)


def _observed(observed: object, number: int) -> None:
    if not isinstance(observed, dict) or not isinstance(observed.get("runs", []), list):
        raise RecordingError("a step's observation is an object with a list of runs", line=number)
    for run in observed.get("runs", []):
        if not isinstance(run, dict) or not isinstance(run.get("events", []), list):
            raise RecordingError("an observed run is an object with a list of event types", line=number)
        for name in ("id", "user", "status"):
            _ident(run, name, number)
        after = run.get("after", 0)
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise RecordingError(f"an observed run's after is a count of events, not {_shown(after)}", line=number)
        for event_type in run.get("events", []):
            _ident({"event": event_type}, "event", number)
    for run_id in observed.get("ids") or []:
        _ident({"id": run_id}, "id", number)
    written_base = observed.get("base", 0)
    if isinstance(written_base, bool) or not isinstance(written_base, int) or written_base < 0:
        raise RecordingError(f"an observation's base is a step number, not {_shown(written_base)}", line=number)
    grants = observed.get("grants", {})
    if not isinstance(grants, dict):
        raise RecordingError("an observation's grants are an object", line=number)
    for user, state in grants.items():
        _ident({"user": user, "state": state}, "user", number)
        _ident({"user": user, "state": state}, "state", number, required=False)
    judgments = observed.get("judgments", [])
    if not isinstance(judgments, list):
        raise RecordingError("an observation's judgments are a list", line=number)
    for judgment in judgments:
        if not isinstance(judgment, dict):
            raise RecordingError("an observed judgment is an object (agent, inputs, state)", line=number)
        _ident(judgment, "agent", number)
        _ident(judgment, "state", number)
        _inputs(judgment.get("inputs"), "an observed judgment's inputs", number)


def _ident(value: Mapping[str, object], name: str, number: int, *, required: bool = True) -> None:
    """A structural field: plain identifier characters only (no markup, no controls, no spaces)."""
    if name not in value or value[name] is None:
        if required:
            raise RecordingError(f"{name} is missing", line=number)
        return
    item = value[name]
    if not isinstance(item, str) or not _IDENT.match(item):
        raise RecordingError(f"{name} must be a plain identifier (letters, digits and _.:@/%+=-), "
                             f"not {_shown(item)}", line=number)


def _shown(value: object) -> str:
    """A value named in an error: its JSON, clipped, its controls escaped (``ascii``)."""
    text = json.dumps(value, ensure_ascii=True) if not isinstance(value, str) else ascii(value)
    return text if len(text) <= 60 else text[:57] + "..."
