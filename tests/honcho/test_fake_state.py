"""The fake's own store: text PostgreSQL cannot hold is stripped (NUL) or refused (lone
surrogates) before anything is stored; a change that cannot be saved is answered 503 and undone;
an unreadable state file is refused in plain words and left as it is."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from services.knowledge.outbox import FakeHonchoService
from services.knowledge.outbox.honcho_fake import FakeHonchoStateError

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
    service = FakeHonchoService(tmp_path / "state.json")
    await setup(service)
    before = (tmp_path / "state.json").read_bytes()
    body = b'{"messages": [{"peer_id": "alice", "content": "ok"}, {"peer_id": "alice", "content": "bad \\ud800"}]}'
    answer = await post(service, "/v3/workspaces/w/sessions/s1/messages", body)
    assert answer.status_code == 422 and "lone surrogate" in answer.json()["detail"][0]["msg"]
    assert service.session_messages("s1", "w") == [] and (tmp_path / "state.json").read_bytes() == before
    nul = await post(service, "/v3/workspaces/w/sessions/s1/messages",
                     {"messages": [{"peer_id": "alice", "content": "a\x00b", "metadata": {"k\x00": "v\x00"}}]})
    assert nul.status_code == 201 and nul.json()[0]["content"] == "ab" and nul.json()[0]["metadata"] == {"k": "v"}


async def test_unsavable_change_is_answered_503_and_undone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    service = FakeHonchoService(tmp_path / "state.json")
    await setup(service)
    before = (tmp_path / "state.json").read_bytes()

    def full_disk(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    answer = await post(service, "/v3/workspaces/w/sessions/s1/messages",
                        {"messages": [{"peer_id": "alice", "content": "not saved"}]})
    assert answer.status_code == 503 and "No space left" in answer.json()["detail"]
    assert service.session_messages("s1", "w") == [] and (tmp_path / "state.json").read_bytes() == before
    monkeypatch.undo()
    again = await post(service, "/v3/workspaces/w/sessions/s1/messages",
                       {"messages": [{"peer_id": "alice", "content": "saved"}]})
    assert again.status_code == 201
    assert [m["content"] for m in FakeHonchoService(tmp_path / "state.json").session_messages("s1", "w")] == ["saved"]


def test_unreadable_state_file_is_refused_in_plain_words_and_left_as_it_is(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_bytes(b'{"workspaces": [tor')
    with pytest.raises(FakeHonchoStateError, match="cannot be read.*move it aside"):
        FakeHonchoService(state)
    done = subprocess.run([sys.executable, "-m", "services.served.honcho", "--state", str(state)],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "move it aside" in done.stderr and "Traceback" not in done.stderr
    assert state.read_bytes() == b'{"workspaces": [tor'
