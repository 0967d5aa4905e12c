"""While a catch-up runs, the process's cyclic garbage collector walks a young generation of
``CATCH_UP_GC_THRESHOLD`` allocations, not Python's 700 (the catch-up of 100,000 runs spent a third
of its time in the collector); the thresholds found before come back when the last holder leaves,
and thresholds set higher, or a collector turned off, are left as they are."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.collector import CATCH_UP_GC_THRESHOLD, collecting_less
from services.workspace import Settings, Workspace


@pytest.fixture
def defaults() -> Iterator[None]:
    found = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*found)


def test_holders_collect_less_often_and_the_last_one_out_puts_the_thresholds_back(defaults: None) -> None:
    with collecting_less():
        assert gc.get_threshold() == CATCH_UP_GC_THRESHOLD
        with collecting_less():
            assert gc.get_threshold() == CATCH_UP_GC_THRESHOLD
        assert gc.get_threshold() == CATCH_UP_GC_THRESHOLD  # the outer one still holds
    assert gc.get_threshold() == (700, 10, 10)


def test_a_holder_that_fails_puts_the_thresholds_back(defaults: None) -> None:
    with pytest.raises(RuntimeError, match="broke"), collecting_less():
        raise RuntimeError("broke")
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("found", [(50_000, 20, 100), (0, 10, 10)], ids=["higher", "off"])
def test_thresholds_set_higher_or_a_collector_turned_off_are_left_as_they_are(
        found: tuple[int, int, int], defaults: None) -> None:
    gc.set_threshold(*found)
    with collecting_less():
        assert gc.get_threshold() == found
    assert gc.get_threshold() == found


async def test_a_windows_catch_up_leaves_the_thresholds_as_it_found_them(tmp_path: Path, defaults: None) -> None:
    served = await Workspace.open(settings=Settings(path=tmp_path / "ws", serve_port=0))
    try:
        window = await Workspace.open(settings=Settings(path=served.path))
        try:
            assert window.follower is not None or served.follower is not None
            for ws in (served, window):  # each burst done: the follower's catch-up, the history's baseline
                if ws.follower is not None:
                    await ws.follower.idle()
                if ws.timeline is not None:
                    await ws.timeline.settled()
            assert gc.get_threshold() == (700, 10, 10)  # the window is open; only the bursts collected less
        finally:
            await window.close()
    finally:
        await served.close()
