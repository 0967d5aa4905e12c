"""Two runs compared: messages aligned as a text diff, events by type, turn times, refusals, outcomes."""

from __future__ import annotations

from services.desk import RefusalRecord, RunDetail
from services.desk.diff import diff_runs


def detail(run_id: str, events: list[dict[str, object]], status: str = "settled") -> RunDetail:
    return RunDetail(id=run_id, user_id="user:ada", name=None, status=status, created_at=0.0, updated_at=0.0,
                     deleted=False, params={}, events=tuple(events), settled=status == "settled", seq=len(events),
                     activity=None, pending=(), question=None, last_turn_error=None,
                     outcome={"outcome": "result"} if status == "settled" else None)


def turn(text: str, reply: str, at: float, took: float) -> list[dict[str, object]]:
    return [{"type": "node.turn.started", "input": {"text": text}, "at": at},
            {"type": "node.output_text.delta", "at": at},
            {"type": "node.output_text.done", "text": reply, "at": at + took},
            {"type": "node.turn.completed", "at": at + took}]


def test_the_first_difference_is_the_first_message_that_differs_and_alike_stretches_fold() -> None:
    common = [e for k in range(20) for e in turn(f"q{k}", f"a{k}", k * 10.0, 1.0)]
    a = detail("a", common + turn("last", "yes", 500.0, 2.0))
    b = detail("b", common + turn("last", "no", 500.0, 3.0), status="idle")
    rows = diff_runs(a, b, [], [RefusalRecord("user:ada", "revoked", "grant revoked", 2, 1.0, "b")])
    differing = [r for r in rows if r.differs]
    assert (differing[0].section, differing[0].left, differing[0].right) == ("outcome", "status settled", "status idle")
    messages = [r for r in differing if r.section == "messages"]
    assert [(r.left, r.right) for r in messages] == [("model: yes", "model: no")]
    assert any(r.section == "messages" and r.left == "… 37 alike" for r in rows)  # 41 alike lines: 2 + fold + 2
    assert not [r for r in differing if r.section == "events"]  # the same types in the same order
    turns = [r for r in differing if r.section == "turns"]
    assert [(r.left, r.right) for r in turns] == [("turn 21: 2.000s", "turn 21: 3.000s")]
    assert ("0 refusals", "1 refusals") in [(r.left, r.right) for r in differing if r.section == "refusals"]
    assert ("", "revoked: grant revoked") in [(r.left, r.right) for r in differing]


def test_an_inserted_event_is_aligned_not_shifting_every_later_row() -> None:
    base = [{"type": t, "at": 0.0} for t in ("node.turn.started", "x.one", "x.two", "node.turn.completed")]
    extra = base[:2] + [{"type": "x.inserted", "at": 0.0}] + base[2:]
    rows = [r for r in diff_runs(detail("a", base), detail("b", extra)) if r.section == "events" and r.differs]
    assert [(r.left, r.right) for r in rows] == [("", "x.inserted")]
