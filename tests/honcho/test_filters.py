"""Honcho's filter language (``services.honcho.filters``), one table against a known message set: each row
is a filter and the messages it must select, or the 422 it must cause. Rows follow the server's
own ``tests/test_advanced_filters.py`` and ``tests/utils/test_filter.py`` where they exist."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from services.honcho import FakeHonchoService

MESSAGES = [  # (label, peer, content, metadata, created_at)
    ("a1", "alice", "I keep bees on the roof", {"topic": "bees", "score": 5, "flag": True,
                                                 "tags": ["x", "y"], "nested": {"deep": {"k": "v"}}}, "2024-01-01T00:00:00Z"),
    ("a2", "alice", "Honey in July", {"topic": "honey", "score": 10, "flag": False}, "2024-06-01T12:00:00Z"),
    ("b1", "bob", "Tea at five", {"topic": "tea", "score": "7"}, "2025-01-01T00:00:00Z"),
    ("b2", "bob", "100% sure_thing", {}, "2025-02-01T00:00:00Z"),
]

ROWS: list[tuple[str, dict[str, Any], set[str] | str]] = [
    ("no filter", {}, {"a1", "a2", "b1", "b2"}),
    ("equality", {"peer_id": "alice"}, {"a1", "a2"}),
    ("wildcard", {"peer_id": "*"}, {"a1", "a2", "b1", "b2"}),
    ("bare list is in", {"peer_id": ["bob"]}, {"b1", "b2"}),
    ("in", {"peer_id": {"in": ["alice", "bob"]}}, {"a1", "a2", "b1", "b2"}),
    ("in empty matches nothing", {"peer_id": {"in": []}}, set()),
    ("in with wildcard", {"peer_id": {"in": ["*"]}}, {"a1", "a2", "b1", "b2"}),
    ("ne", {"peer_id": {"ne": "alice"}}, {"b1", "b2"}),
    ("ne null is not null", {"peer_id": {"ne": None}}, {"a1", "a2", "b1", "b2"}),
    ("null is null", {"peer_id": None}, set()),
    ("gte date", {"created_at": {"gte": "2024-06-01"}}, {"a2", "b1", "b2"}),
    ("gt and lt", {"created_at": {"gt": "2024-01-01T00:00:00Z", "lt": "2025-01-01"}}, {"a2"}),
    ("lte with offset", {"created_at": {"lte": "2024-01-01T01:00:00+01:00"}}, {"a1"}),
    ("token_count gte", {"token_count": {"gte": 6}}, {"a1"}),
    ("AND", {"AND": [{"peer_id": "alice"}, {"created_at": {"gte": "2024-02-01"}}]}, {"a2"}),
    ("OR", {"OR": [{"peer_id": "bob"}, {"metadata": {"topic": "bees"}}]}, {"a1", "b1", "b2"}),
    ("NOT", {"NOT": [{"peer_id": "alice"}]}, {"b1", "b2"}),
    ("NOT of an unset key keeps it", {"NOT": [{"metadata": {"topic": "tea"}}]}, {"a1", "a2", "b2"}),
    ("empty AND in OR", {"OR": [{"AND": []}, {"peer_id": "bob"}]}, {"b1", "b2"}),
    ("metadata equality", {"metadata": {"topic": "honey"}}, {"a2"}),
    ("metadata bool", {"metadata": {"flag": True}}, {"a1"}),
    ("metadata nested containment", {"metadata": {"nested": {"deep": {"k": "v"}}}}, {"a1"}),
    ("metadata array containment", {"metadata": {"tags": ["y"]}}, {"a1"}),
    ("metadata wildcard", {"metadata": {"topic": "*"}}, {"a1", "a2", "b1", "b2"}),
    ("metadata number gte", {"metadata": {"score": {"gte": 6}}}, {"a2", "b1"}),
    ("metadata number lt", {"metadata": {"score": {"lt": 6}}}, {"a1"}),
    ("metadata in as text", {"metadata": {"score": {"in": [5, "7"]}}}, {"a1", "b1"}),
    ("metadata contains", {"metadata": {"topic": {"contains": "ONE"}}}, {"a2"}),
    ("metadata containment under contains", {"metadata": {"contains": {"topic": "tea"}}}, {"b1"}),
    ("metadata string compare", {"metadata": {"topic": {"gte": "honey"}}}, {"a2", "b1"}),
    ("text contains escapes", {"peer_id": {"contains": "b"}}, {"b1", "b2"}),
    ("unknown column", {"non_existent_column": "value"}, "Column 'non_existent_column' is not allowed"),
    ("id is not a message column", {"id": "x"}, "does not exist on Message"),
    ("unknown operator", {"peer_id": {"regex": "a"}}, "unsupported operator"),
    ("bad datetime", {"created_at": {"gte": "not a date"}}, "Invalid datetime value"),
    ("number for text", {"peer_id": 5}, "expected a string"),
    ("contains on a number column", {"token_count": {"contains": "1"}}, "requires a text column"),
    ("AND must be a list", {"AND": {"peer_id": "a"}}, "AND operator must contain a list"),
    ("NOT null", {"NOT": None}, "NOT operator cannot be None"),
    ("gte null", {"created_at": {"gte": None}}, "does not accept null"),
    ("scalar metadata", {"metadata": "x"}, "a JSONB column takes an object"),
    ("in needs a list", {"peer_id": {"in": "alice"}}, "Invalid value for 'in' operator"),
    ("too deep", {"AND": [{"AND": [{"AND": [{"AND": [{"AND": [{"AND": [{"AND": []}]}]}]}]}]}]},
     "maximum depth of 5"),
]


@pytest.fixture(scope="module")
def stored() -> tuple[FakeHonchoService, dict[str, str]]:
    service = FakeHonchoService()
    ids: dict[str, str] = {}
    with httpx.Client(transport=httpx.MockTransport(service.handle), base_url="http://honcho.fake") as http:
        for label, peer, content, metadata, at in MESSAGES:
            answer = http.post("/v3/workspaces/w/sessions/s/messages",
                               json={"messages": [{"peer_id": peer, "content": content, "metadata": metadata,
                                                   "created_at": at}]})
            assert answer.status_code == 201, answer.text
            ids[answer.json()[0]["id"]] = label
    return service, ids


@pytest.mark.parametrize(("name", "filters", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_filter_row(stored: tuple[FakeHonchoService, dict[str, str]], name: str, filters: dict[str, Any],
                    expected: set[str] | str) -> None:
    service, ids = stored
    with httpx.Client(transport=httpx.MockTransport(service.handle), base_url="http://honcho.fake") as http:
        answer = http.post("/v3/workspaces/w/sessions/s/messages/list", json={"filters": filters})
    if isinstance(expected, str):
        assert answer.status_code == 422 and expected in answer.json()["detail"], answer.text
    else:
        assert answer.status_code == 200, answer.text
        assert {ids[m["id"]] for m in answer.json()["items"]} == expected


def test_other_resources_have_their_own_columns(stored: tuple[FakeHonchoService, dict[str, str]]) -> None:
    service, _ = stored
    with httpx.Client(transport=httpx.MockTransport(service.handle), base_url="http://honcho.fake") as http:
        sessions = http.post("/v3/workspaces/w/sessions/list", json={"filters": {"is_active": True, "id": "s"}})
        assert [s["id"] for s in sessions.json()["items"]] == ["s"]
        wrong = http.post("/v3/workspaces/w/sessions/list", json={"filters": {"is_active": "yes"}})
        assert wrong.status_code == 422 and "expected true or false" in wrong.json()["detail"]
        peers = http.post("/v3/workspaces/w/peers/list", json={"filters": {"session_id": "s"}})
        assert peers.status_code == 422 and "does not exist on Peer" in peers.json()["detail"]
        level = http.post("/v3/workspaces/w/conclusions/list", json={"filters": {"level": "wild"}})
        assert level.status_code == 422 and "Expected one of" in level.json()["detail"]


def test_the_rule_made_answers_count_in_the_right_number() -> None:
    """``1 message``, ``from 1 stored message and 1 conclusion`` (issue 37: ``1 messages`` read wrong)."""
    from services.honcho.answers import HonchoAsk, default_answer

    one = [{"content": "the hives face south", "peer_id": "ada"}]
    assert str(default_answer(HonchoAsk("representation", "w", "ada", messages=one))).startswith(
        "[fake Honcho representation] ada: 1 message;")
    assert "1 message from 1 peer:" in str(default_answer(HonchoAsk("summary", "w", "ada", messages=one)))
    chat = str(default_answer(HonchoAsk("chat", "w", "ada", query="hives", messages=one, conclusions=["x"])))
    assert "from 1 stored message and 1 conclusion:" in chat
    two = str(default_answer(HonchoAsk("chat", "w", "ada", query="hives", messages=one * 2)))
    assert "from 2 stored messages and 0 conclusions:" in two
