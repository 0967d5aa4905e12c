"""Read models of runs for the approval queue: ``item_of`` (queue row) and ``detail_of`` (one judgment).

The ISO-8601 times of ``run.json`` become float seconds here, once (``services.times``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ...files import CorruptFileError, open_regular, read_json
from ...times import parse_time, time_or_none
from .errors import OkfError
from .limits import MAX_JUDGMENT_BYTES
from .models import AcceptedReceipt, GitDelivery, JudgmentDetail, JudgmentItem, OutcomeView
from .proposal import FileChange, file_changes, read_proposal
from .runs import RunBook
from .shapes import Receipt, Run
from .state import StateDir

__all__ = ["item_of", "detail_of"]


def _object(value: object) -> Mapping[str, object]:
    """``value`` when it is a JSON object, else an empty one (a damaged run still lists)."""
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[object]:
    """``value`` when it is a JSON list, else an empty one."""
    return value if isinstance(value, list) else []


def item_of(run: Run, agent: str) -> JudgmentItem:
    """The queue row of one run."""
    judgment = _object(run.get("judgment"))
    outcomes = _list(judgment.get("outcomes"))
    counts = {"promote": 0, "merge": 0, "drop": 0}
    for outcome in outcomes:
        if isinstance(outcome, dict) and outcome.get("verdict") in counts:
            counts[outcome["verdict"]] += 1
    error = run.get("error")
    review = run.get("review") or {}
    return JudgmentItem(
        id=run["id"], source_id=run["source"], agent=agent, state=review.get("state", "judging"),
        run_status=run["status"], attempt=int(run.get("attempt", 1)), created_at=parse_time(run.get("created")),
        inputs=len(run["inputs"]), promote=counts["promote"], merge=counts["merge"], drop=counts["drop"],
        problems=tuple(error.get("problems", []) if error else ()), reason=review.get("reason"),
        receipts=tuple(sorted((alias, r.get("status", "")) for alias, r in run.get("receipts", {}).items())),
        accepted=tuple(sorted(AcceptedReceipt(alias, str(r.get("acceptedDigest") or r.get("acceptedCommit")),
                                              time_or_none(r.get("acceptedAt")))
                              for alias, r in run.get("receipts", {}).items()
                              if r.get("acceptedDigest") or r.get("acceptedCommit"))),
        git=tuple(git_delivery(alias, r) for alias, r in sorted(run.get("receipts", {}).items()) if r.get("branch")),
    )


def git_delivery(alias: str, receipt: Receipt) -> GitDelivery:
    """The pane's view of one Git receipt."""
    pr = _object(receipt.get("pr"))

    def text(value: object) -> str | None:
        return None if value is None else str(value)

    return GitDelivery(alias=alias, status=str(receipt.get("status", "")), branch=text(receipt.get("branch")),
                       commit=text(receipt.get("commit")), pr_url=text(pr.get("url")), pr_state=text(pr.get("state")),
                       review=text(receipt.get("review")), accepted_commit=text(receipt.get("acceptedCommit")),
                       rejected=text(receipt.get("rejectedUpstream")), upstream=text(receipt.get("upstream")))


def _input_view(state: StateDir, source_id: str, input_id: str) -> tuple[str, str, str]:
    try:
        payload = state.read_input(source_id, input_id)
    except Exception as exc:
        return "missing", input_id, str(exc)
    if payload.get("kind") == "note":
        return "note", str(payload.get("name")), str(payload.get("text"))
    lines = [f"[{t.get('id')}] {p.get('role')}: {p.get('text')}" for t in payload.get("turns", []) for p in t.get("text", [])]
    return "record", str(payload.get("thread")), "\n".join(lines)


def detail_of(state: StateDir, runs: RunBook, source_id: str, run_id: str) -> JudgmentDetail:
    """Outcomes, inputs, files and diff of one judgment (whatever part of it is readable)."""
    run = state.load_run(source_id, run_id)
    item = item_of(run, state.source(source_id)["agent"])
    judgment = _object(run.get("judgment"))
    review = run.get("review") or {}
    approved, declined = set(review.get("approved", [])), set(review.get("declined", []))
    outcomes = []
    for outcome in _list(judgment.get("outcomes")):
        if not isinstance(outcome, dict):
            continue
        input_id = str(outcome.get("input"))
        kind, name, text = _input_view(state, source_id, input_id) if input_id in run["inputs"] else ("unknown", input_id, "")
        concepts = _list(outcome.get("concepts"))
        outcomes.append(OutcomeView(
            input=input_id, verdict=str(outcome.get("verdict")), reason=str(outcome.get("reason", "")),
            input_kind=kind, input_name=name, input_text=text,
            concepts=tuple(f"{c.get('base')}/{c.get('path')}" for c in concepts if isinstance(c, dict)),
            decision="approved" if input_id in approved else "declined" if input_id in declined else None))
    files: list[FileChange] = []
    for alias, receipt in sorted(run.get("receipts", {}).items()):
        proposal_file = receipt.get("proposal")
        if not proposal_file:
            continue
        try:
            delta = read_proposal(read_json(Path(proposal_file)))
        except (OSError, ValueError, OkfError, CorruptFileError):
            continue
        files.extend(file_changes(alias, delta.before, delta.after))
    removals = _list(judgment.get("removals"))
    reply = None
    reply_file = runs.work_dir(source_id, run_id) / "judgment.json"
    if item.state == "invalid" and reply_file.exists():
        try:
            with open_regular(reply_file) as handle:  # the judge's reply, shown up to the size a reply may be
                reply = handle.read(MAX_JUDGMENT_BYTES).decode("utf-8", errors="replace")
        except (OSError, CorruptFileError) as exc:
            reply = f"(the reply cannot be read: {exc})"
    return JudgmentDetail(
        item=item, outcomes=tuple(outcomes), files=tuple(files), diff="".join(f.diff for f in files),
        removals=tuple((str(r.get("base")), str(r.get("path")), str(r.get("reason"))) for r in removals if isinstance(r, dict)),
        reply=reply)
