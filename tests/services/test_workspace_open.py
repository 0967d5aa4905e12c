"""A workspace that cannot open says which file, why and what to do, and its remedy works.

Running as root, a folder with mode 000 stays readable, so the unreadable cases are ones root cannot
pass either: the workspace path is a file, and ``canvas.db`` is a folder.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from services.clock import FakeClock
from services.workspace import Settings, Workspace, WorkspaceOpenError


def settings(path: Path) -> Settings:
    return Settings(path=path, clock=FakeClock())


async def made(path: Path) -> Path:
    workspace = await Workspace.open(settings=settings(path))
    await workspace.close()
    return path


def garbage(root: Path) -> Path:
    (root / "canvas.db").write_bytes(b"these bytes were never a database\n" * 200)
    return root / "canvas.db"


def truncated(root: Path) -> Path:
    db = root / "canvas.db"
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])
    return db


def folder_for_db(root: Path) -> Path:
    db = root / "canvas.db"
    db.unlink()
    (db / "inside").mkdir(parents=True)
    return db


DAMAGE: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    "garbage": (garbage, "is not an SQLite database", "Move the damaged file aside"),
    "truncated": (truncated, "is damaged", "Move the damaged file aside"),
    "canvas.db is a folder": (folder_for_db, "cannot be opened as a database file", "Check that"),
}


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("damage", list(DAMAGE))
async def test_a_damaged_or_unusable_canvas_db_is_refused_in_plain_words_and_nothing_is_touched(tmp_path, damage) -> None:
    root = await made(tmp_path / "ws")
    spoil, cause, remedy = DAMAGE[damage]
    bad = spoil(root)
    before = snapshot(root)
    with pytest.raises(WorkspaceOpenError) as info:
        await Workspace.open(settings=settings(root))
    error = info.value
    assert error.path == bad and cause in error.cause and error.remedy.startswith(remedy)
    assert str(bad) in str(error)
    words = f"{error} {error.cause} {error.remedy}".lower()
    assert "sqlalchemy" not in words and "sqlalche.me" not in words and "(sqlite3." not in words
    after = snapshot(root)
    assert {k: v for k, v in after.items() if not k.startswith("canvas.db")} == \
        {k: v for k, v in before.items() if not k.startswith("canvas.db")}
    if bad.is_file():
        assert after[bad.name] == before[bad.name]  # the damaged file is left exactly as it was
    # the remedy works: moved aside, the workspace opens (with a new, empty canvas)
    shutil.move(bad, bad.with_name(bad.name + ".damaged"))
    workspace = await Workspace.open(settings=settings(root))
    try:
        assert workspace.canvas is not None and (root / "canvas.db").is_file()
        assert (root / "knowledge").is_dir() and workspace.okf is not None
    finally:
        await workspace.close()


async def test_a_workspace_path_that_is_a_file_is_refused_and_the_file_kept(tmp_path) -> None:
    path = tmp_path / "ws"
    path.write_text("my notes, not a workspace\n")
    with pytest.raises(WorkspaceOpenError) as info:
        await Workspace.open(settings=settings(path))
    assert info.value.path == path and "a file where a folder belongs" in info.value.cause
    assert "another --workspace" in info.value.remedy
    assert path.read_text() == "my notes, not a workspace\n"


async def test_a_knowledge_folder_that_is_a_file_names_it(tmp_path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "knowledge").write_text("oops\n")
    with pytest.raises(WorkspaceOpenError) as info:
        await Workspace.open(settings=settings(root))
    assert info.value.path == root / "knowledge" and "a file where a folder belongs" in info.value.cause
    assert (root / "knowledge").read_text() == "oops\n"


async def test_a_corrupt_json_file_the_open_needs_is_named_with_the_way_out(tmp_path) -> None:
    root = await made(tmp_path / "ws")
    bindings = root / "knowledge" / "okf-bindings.json"
    good = bindings.read_bytes()
    bindings.write_text("{not json")
    with pytest.raises(WorkspaceOpenError) as info:
        await Workspace.open(settings=settings(root))
    error = info.value
    assert error.path == bindings and "not valid JSON" in error.cause
    assert error.remedy.startswith("Move the damaged file aside") and str(bindings) in error.remedy
    assert bindings.read_text() == "{not json"  # left as it was for the person to look at
    bindings.write_bytes(good)
    workspace = await Workspace.open(settings=settings(root))
    await workspace.close()
