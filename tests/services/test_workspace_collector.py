"""While a workspace is open, the process's cyclic garbage collector walks a young generation of
``WINDOW_GC_THRESHOLD`` allocations, not Python's 700 (a window over many runs spent a third of a
catch-up in the collector); the thresholds found before come back when the last workspace closes, and
thresholds set higher, or a collector turned off, are left as they are."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.open_errors import WorkspaceOpenError
from services.workspace import WINDOW_GC_THRESHOLD, Settings, Workspace


@pytest.fixture
def defaults() -> Iterator[None]:
    found = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*found)


async def test_open_workspaces_collect_less_often_and_the_last_close_puts_the_thresholds_back(
        tmp_path: Path, defaults: None) -> None:
    first = await Workspace.open(settings=Settings(path=tmp_path / "one"))
    assert gc.get_threshold() == WINDOW_GC_THRESHOLD
    second = await Workspace.open(settings=Settings(path=tmp_path / "two"))
    await first.close()
    assert gc.get_threshold() == WINDOW_GC_THRESHOLD  # one is still open
    await first.close()  # closed twice: counted once
    assert gc.get_threshold() == WINDOW_GC_THRESHOLD
    await second.close()
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("found", [(50_000, 20, 100), (0, 10, 10)], ids=["higher", "off"])
async def test_thresholds_set_higher_or_a_collector_turned_off_are_left_as_they_are(
        found: tuple[int, int, int], tmp_path: Path, defaults: None) -> None:
    gc.set_threshold(*found)
    ws = await Workspace.open(settings=Settings(path=tmp_path / "ws"))
    try:
        assert gc.get_threshold() == found
    finally:
        await ws.close()
    assert gc.get_threshold() == found


async def test_an_open_that_fails_puts_the_thresholds_back(tmp_path: Path, defaults: None) -> None:
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    with pytest.raises(WorkspaceOpenError, match="a file where a folder belongs"):
        await Workspace.open(settings=Settings(path=blocker))
    assert gc.get_threshold() == (700, 10, 10)
