"""The shared primitives: atomic writes, guarded paths, the sanitizer, the change feed."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from services.changes import Change, ChangeFeed
from services.files import (
    CorruptFileError,
    PathError,
    atomic_write_json,
    atomic_write_text,
    contained_path,
    publish_tree,
    read_json,
)
from services.text import sanitize


def test_atomic_write_replaces_whole_and_keeps_mode(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    atomic_write_json(target, {"v": 1})
    os.chmod(target, 0o600)
    atomic_write_json(target, {"v": 2})
    assert read_json(target) == {"v": 2}
    assert oct(target.stat().st_mode & 0o777) == oct(0o600)
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_atomic_write_failure_leaves_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "a.txt"
    atomic_write_text(target, "old")

    def boom(*args: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_publish_tree_appears_whole_and_never_over_an_existing_folder(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "base"
    publish_tree(target, {"index.md": b"# base\n", "node/log.md": b"# Log\n"})
    assert (target / "node" / "log.md").read_bytes() == b"# Log\n"
    with pytest.raises(FileExistsError):
        publish_tree(target, {"index.md": b"other"})
    assert (target / "index.md").read_bytes() == b"# base\n"

    def boom(*args: object) -> None:  # a crash at the rename: nothing half made is left behind
        raise OSError("disk gone")

    monkeypatch.setattr(os, "rename", boom)
    with pytest.raises(OSError):
        publish_tree(tmp_path / "second", {"a.md": b"a"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base"]


def test_read_json_names_corrupt_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CorruptFileError, match="bad.json"):
        read_json(bad)


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/etc/passwd", "a\0b", "", ".", "../base2/x"])
def test_contained_path_refuses_escapes(tmp_path: Path, name: str) -> None:
    base = tmp_path / "base"
    base.mkdir()
    with pytest.raises(PathError):
        contained_path(base, name)


def test_contained_path_refuses_links(tmp_path: Path) -> None:
    base = tmp_path / "base"
    (base / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("secret")
    (base / "link").symlink_to(outside)
    (base / "flink").symlink_to(outside / "f")
    os.link(outside / "f", base / "hard")
    for name in ("link/f", "flink", "hard"):
        with pytest.raises(PathError):
            contained_path(base, name)
    assert contained_path(base, "sub/new.md") == (base / "sub" / "new.md").resolve()


def test_sanitize_makes_controls_visible_and_keeps_text() -> None:
    hostile = "[bold]x[/] $v [$x] \x1b]0;PWNED\x07 \x1b[2J \x9b31m \x00 \x7f \u202e"
    out = sanitize(hostile)
    assert "[bold]x[/] $v [$x]" in out
    assert not any(ord(c) < 0x20 and c not in "\t\n" for c in out)
    assert not any(0x7F <= ord(c) <= 0x9F for c in out)
    assert "\u202e" not in out


async def test_change_feed_reaches_async_subscribers() -> None:
    feed = ChangeFeed()
    seen: list[Change] = []

    async def consume() -> None:
        async for change in feed.changes():
            seen.append(change)
            if len(seen) == 2:
                return

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    feed.announce("cloud", "run.started", "run_1")
    await asyncio.to_thread(feed.announce, "okf", "judgment.pending", "j1")
    await asyncio.wait_for(task, 2)
    assert [(c.source, c.kind, c.id) for c in seen] == [
        ("cloud", "run.started", "run_1"),
        ("okf", "judgment.pending", "j1"),
    ]
