"""The filter language: words, phrases, fields, negation, durations, and refusals that name the fields."""

from __future__ import annotations

import pytest

from services.desk import RunView
from services.desk.filters import FilterError, JudgmentRow, Term, compile_filter, parse_duration, parse_filter

NOW = 1_800_000_000.0


def run(id: str, status: str = "idle", user: str = "user:ada", prompt: str = "plan the garden", age: float = 0.0,
        name: str = "") -> RunView:
    return RunView(id=id, user_id=user, name=name, status=status, activity=None, prompt=prompt,
                   created_at=NOW - age, updated_at=NOW - age, events=0, pending=0, outcome=None, question=None,
                   last_turn_error=None, deleted=False)


RUNS = [run("r1", "waiting_on_user", prompt="feed the bees", age=60), run("r2", "settled", "user:bob", age=7200),
        run("r3", "running", prompt="bee count", age=10), run("r4", "idle", "user:ada", prompt="tea", age=90000)]


def ids(text: str) -> list[str]:
    return [r.id for r in compile_filter(text, "runs", NOW).filter(RUNS)]


def test_fields_words_phrases_negation_and_since_combine() -> None:
    assert ids("status:waiting person:ada since:5m \"bee\"") == ["r1"]
    assert ids("-status:settled") == ["r1", "r3", "r4"]
    assert ids("status:waiting_on_user") == ids('status:"waiting on user"') == ["r1"]
    assert ids("status:idle status:running") == ["r3", "r4"]  # one field twice: either value
    assert ids("bee -feed") == ["r3"]
    assert ids("since:2h") == ["r1", "r2", "r3"]
    assert ids("-since:1d") == ["r4"]
    assert ids("") == ["r1", "r2", "r3", "r4"]
    assert compile_filter('status:idle "the bees" x', "runs", NOW).needle == "the bees"


def test_unknown_fields_unclosed_quotes_and_bad_durations_are_refused_in_words() -> None:
    with pytest.raises(FilterError, match="runs has no field 'user'; its fields are status, person, .*since"):
        parse_filter("user:ada", "runs")
    assert parse_filter('"user:ada"', "runs") == (Term(None, "user:ada"),)
    with pytest.raises(FilterError, match="quote is not closed"):
        parse_filter('status:idle "bee', "runs")
    with pytest.raises(FilterError, match="since takes a duration"):
        parse_filter("since:yesterday", "runs")
    with pytest.raises(FilterError, match="needs a value"):
        parse_filter("status:", "runs")
    with pytest.raises(FilterError, match="grants has no field 'since'"):
        parse_filter("since:5m", "grants")


def test_durations() -> None:
    assert parse_duration("30s") == 30 and parse_duration("5m") == 300 and parse_duration("1h30m") == 5400
    assert parse_duration("1d") == 86400 and parse_duration("1w") == 7 * 86400
    for bad in ("", "5", "m5", "5x", "5m ", "-5m"):
        with pytest.raises(FilterError):
            parse_duration(bad)


def test_judgments_read_kind_and_state() -> None:
    rows = [JudgmentRow("okf:j1", "harvest", "pending", "gardener", "notes a, b", NOW),
            JudgmentRow("okf:j2", "harvest", "approved", "gardener", "notes c", NOW),
            JudgmentRow("insight:i1", "insight", "pending", "user:ada", "bees → ada/bees", NOW)]
    query = compile_filter("kind:harvest state:pending", "judgments", NOW)
    assert [r.key for r in query.filter(rows)] == ["okf:j1"]
