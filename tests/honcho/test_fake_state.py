"""The fake's own store (SQLite): text PostgreSQL cannot hold is stripped (NUL) or refused (lone
surrogates) before anything is stored; a change that cannot be saved is answered 503 and rolled
back; an unreadable state file is refused in plain words and left as it is; the old one-file JSON
state is imported once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from services.honcho import FakeHonchoService
from services.honcho.service import FakeHonchoStateError

REPO = Path(__file__).resolve().parents[2]


async def post(service: FakeHonchoService, path: str, body: bytes | dict) -> httpx.Response:
    async with httpx.AsyncClient(transport=service.transport, base_url="http://honcho.fake") as http:
        if isinstance(body, bytes):
            return await http.post(path, content=body, headers={"content-type": "application/json"})
        return await http.post(path, json=body)


async def setup(service: FakeHonchoService) -> None:
    await post(service, "/v3/workspaces", {"id": "w"})
    await post(service, "/v3/workspaces/w/sessions", {"id": "s1"})


async def test_unstorable_text_is_refused_before_anything_is_stored(tmp_path: Path) -> None:
    service = FakeHonchoService(tmp_path / "state.db")
    await setup(service)
    body = b'{"messages": [{"peer_id": "alice", "content": "ok"}, {"peer_id": "alice", "content": "bad \\ud800"}]}'
    answer = await post(service, "/v3/workspaces/w/sessions/s1/messages", body)
    assert answer.status_code == 422 and "lone surrogate" in answer.json()["detail"][0]["msg"]
    assert service.session_messages("s1", "w") == []
    nul = await post(service, "/v3/workspaces/w/sessions/s1/messages",
                     {"messages": [{"peer_id": "alice", "content": "a\x00b", "metadata": {"k\x00": "v\x00"}}]})
    assert nul.status_code == 201 and nul.json()[0]["content"] == "ab" and nul.json()[0]["metadata"] == {"k": "v"}


async def test_unsavable_change_is_answered_503_and_rolled_back(tmp_path: Path) -> None:
    service = FakeHonchoService(tmp_path / "state.db")
    await setup(service)
    service.fill_disk(0)
    big = [{"peer_id": "alice", "content": "x" * 20_000} for _ in range(50)]
    answer = await post(service, "/v3/workspaces/w/sessions/s1/messages", {"messages": big})
    assert answer.status_code == 503 and "full" in answer.json()["detail"]
    assert service.session_messages("s1", "w") == []
    service.fill_disk(None)
    again = await post(service, "/v3/workspaces/w/sessions/s1/messages",
                       {"messages": [{"peer_id": "alice", "content": "saved"}]})
    assert again.status_code == 201
    service.close()
    assert [m["content"] for m in FakeHonchoService(tmp_path / "state.db").session_messages("s1", "w")] == ["saved"]


def test_unreadable_state_file_is_refused_in_plain_words_and_left_as_it_is(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    state.write_bytes(b"this is not a database, it is a text file of some length " * 40)
    before = state.read_bytes()
    with pytest.raises(FakeHonchoStateError, match="cannot be read.*move it aside"):
        FakeHonchoService(state)
    done = subprocess.run([sys.executable, "-m", "services.served.honcho", "--state", str(state)],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "move it aside" in done.stderr and "Traceback" not in done.stderr
    assert state.read_bytes() == before


def test_old_json_state_is_imported_once(tmp_path: Path) -> None:
    legacy = tmp_path / "served-honcho.json"
    legacy.write_text(json.dumps({"next_id": 3, "workspaces": {"w": {
        "peers": {"alice": {"id": "alice", "metadata": {"k": 1}, "created_at": "2025-01-01T00:00:00+00:00"}},
        "sessions": {"s1": {"id": "s1", "metadata": {"topic": "tea"}, "created_at": "2025-01-01T00:00:00+00:00"}},
        "session_peers": {"s1": {"alice": {}}},
        "messages": {"s1": [{"id": "msg_00000001", "content": "hello", "peer_id": "alice",
                             "created_at": "2025-01-01T00:00:01+00:00", "token_count": 1}]},
        "conclusions": [{"id": "con_00000002", "content": "likes tea", "observer_id": "alice",
                         "observed_id": "alice", "created_at": "2025-01-01T00:00:02+00:00"}]}}}))
    service = FakeHonchoService(legacy)
    assert [m["content"] for m in service.session_messages("s1", "w")] == ["hello"]
    assert service.session_members("s1", "w") == {"alice": {}}
    assert [c["content"] for c in service.stored_conclusions("w")] == ["likes tea"]
    assert not legacy.exists() and (tmp_path / "served-honcho.json.imported").exists()
    assert (tmp_path / "served-honcho.db").exists()
    service.close()
    again = FakeHonchoService(legacy)  # the database is now the state; nothing imported twice
    assert len(again.session_messages("s1", "w")) == 1


async def test_a_store_from_before_keeps_its_search_index_whole(tmp_path: Path) -> None:
    """A store written while a per-row trigger indexed messages: opening drops the trigger, every
    message (old, new, cloned) is indexed exactly once and found by search."""
    import sqlite3

    from services.honcho.store import SCHEMA

    state = tmp_path / "state.db"
    old = sqlite3.connect(state, isolation_level=None)
    old.executescript(SCHEMA + """
        CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, content) VALUES (new.seq, new.content); END;
        INSERT INTO workspaces (id, created_at, ts) VALUES ('w', '2025-01-01T00:00:00+00:00', '2025');
        INSERT INTO sessions VALUES ('w', 's1', '{}', '{}', 1, '2025-01-01T00:00:00+00:00', '2025');
        INSERT INTO messages (id, workspace_id, session_id, peer_id, content, created_at, ts, token_count)
            VALUES ('msg_old', 'w', 's1', 'alice', 'teapot from before', '2025-01-01T00:00:00+00:00', '2025', 3);
        INSERT OR REPLACE INTO counter VALUES ('next_id', 10);""")
    old.close()
    service = FakeHonchoService(state)
    added = await post(service, "/v3/workspaces/w/sessions/s1/messages",
                       {"messages": [{"peer_id": "alice", "content": f"teapot number {i}"} for i in range(3)]})
    assert added.status_code == 201 and [m["id"] for m in added.json()] == [f"msg_{i:08d}" for i in (10, 11, 12)]
    cloned = await post(service, "/v3/workspaces/w/sessions/s1/clone", b"")
    assert cloned.status_code == 201
    found = await post(service, "/v3/workspaces/w/search", {"query": "teapot", "limit": 100})
    assert sorted(m["content"] for m in found.json()) == sorted(["teapot from before", *(f"teapot number {i}"
                                                                                          for i in range(3))] * 2)
    service.close()
    check = sqlite3.connect(state, isolation_level=None)
    assert check.execute("SELECT count(*) FROM sqlite_master WHERE name = 'messages_ai'").fetchone()[0] == 0
    check.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")  # raises when off
    assert check.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'teapot'").fetchone()[0] == 8
    check.close()
