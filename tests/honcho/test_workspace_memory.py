"""A workspace whose settings name a Honcho URL delivers its memory there, with the key from
``HONCHO_API_KEY`` (never written to a file), and says where memory goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.honcho import FakeHonchoService
from services.knowledge.outbox import OutboxError
from services.served.honcho import HonchoServer
from services.knowledge.outbox.target import memory_target
from services.workspace import Settings, Workspace

SECRET = "hk-test-4f1c9a"


async def test_workspace_with_a_honcho_url_delivers_there_with_the_key_from_the_environment(
        tmp_path: Path, served: HonchoServer, service: FakeHonchoService, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HONCHO_API_KEY", SECRET)
    folder = tmp_path / "ws"
    workspace = await Workspace.open(folder, settings=Settings(path=folder, honcho_url=served.url,
                                                               honcho_workspace_id="team-memory"))
    try:
        assert workspace.outbox.fake_honcho is None
        assert workspace.outbox.destination == f"{served.url} (workspace team-memory)"
        await workspace.outbox.capture_turn("conv-1", "alice", [{"role": "user", "text": "remember the bees"}])
        result = await workspace.outbox.sweep()
        assert result.delivered_messages >= 1 and workspace.outbox.unreachable is None
    finally:
        await workspace.close()
    assert "remember the bees" in [m["content"] for m in service.all_messages("team-memory")]
    assert service.authorization == f"Bearer {SECRET}"
    for path in folder.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), f"the API key was written to {path}"


def test_a_honcho_url_that_is_not_http_is_refused_in_plain_words() -> None:
    with pytest.raises(OutboxError, match="must look like"):
        memory_target("ftp://memory.example", "w")
    with pytest.raises(OutboxError, match="only letters"):
        memory_target("https://memory.example", "bad id")
    assert memory_target(None)["settings"].workspace_id == "workbench"
    assert memory_target("https://memory.example/", "w", environ={})["api_key"] is None


def test_command_line_and_honcho_environment_name_where_memory_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.cli import _memory, build_parser

    monkeypatch.delenv("HONCHO_URL", raising=False)
    monkeypatch.delenv("HONCHO_WORKSPACE_ID", raising=False)
    assert _memory(build_parser().parse_args([])) == {"honcho_url": None, "honcho_workspace_id": "workbench"}
    monkeypatch.setenv("HONCHO_URL", "https://memory.example")
    monkeypatch.setenv("HONCHO_WORKSPACE_ID", "from-env")
    assert _memory(build_parser().parse_args([])) == {"honcho_url": "https://memory.example",
                                                      "honcho_workspace_id": "from-env"}
    flags = build_parser().parse_args(["--honcho-url", "http://127.0.0.1:8000", "--honcho-workspace", "team"])
    assert _memory(flags) == {"honcho_url": "http://127.0.0.1:8000", "honcho_workspace_id": "team"}


def test_the_settings_file_names_where_memory_goes_but_never_holds_the_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.cli import _memory, build_parser
    from workbench.settings import load_config

    monkeypatch.delenv("HONCHO_URL", raising=False)
    monkeypatch.delenv("HONCHO_WORKSPACE_ID", raising=False)
    path = tmp_path / "config.toml"
    path.write_text('honcho_url = "https://memory.team"\nhoncho_workspace = "agents"\n')
    config = load_config(path)
    assert config.problem is None
    assert _memory(build_parser().parse_args([]), config) == {"honcho_url": "https://memory.team",
                                                              "honcho_workspace_id": "agents"}
    # the flags and Honcho's own environment variables still win over the file
    monkeypatch.setenv("HONCHO_WORKSPACE_ID", "from-env")
    flags = build_parser().parse_args(["--honcho-url", "http://127.0.0.1:8000"])
    assert _memory(flags, config) == {"honcho_url": "http://127.0.0.1:8000", "honcho_workspace_id": "from-env"}
    # a key is not a setting: the file that tries to hold one is refused, naming its line
    path.write_text('honcho_url = "https://memory.team"\nhoncho_api_key = "hk-secret"\n')
    refused = load_config(path)
    assert refused.problem is not None and "line 2" in refused.problem and "honcho_api_key" in refused.problem
    assert refused.honcho_url is None


async def test_a_served_workspace_delivers_its_memory_to_the_honcho_it_serves(tmp_path: Path) -> None:
    import asyncio

    from honcho import Honcho

    folder = tmp_path / "served"
    workspace = await Workspace.open(folder, settings=Settings(path=folder, serve_port=0, seed=False))
    try:
        url = workspace.server.honcho_url
        assert url is not None and workspace.outbox.destination == f"{url} (workspace workbench)"
        assert workspace.outbox.embedded is False
        await workspace.outbox.capture_turn("conv-7", "alice", [{"role": "user", "text": "served memory"}])
        await workspace.outbox.sweep()
        honcho = Honcho(base_url=url, workspace_id="workbench", api_key=workspace.server.honcho_key, max_retries=0)
        found = await asyncio.to_thread(lambda: [m.content for m in honcho.peer("alice").search("served memory")])
        assert found == ["served memory"]
    finally:
        await workspace.close()
    stored = FakeHonchoService(folder / "memory" / "served-honcho.db").all_messages()
    assert "served memory" in [m["content"] for m in stored]
