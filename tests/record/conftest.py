"""Fixtures for the recording tests: one pilot session, recorded once for the package."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from .pilot import record_pilot_session


@pytest.fixture(scope="package")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One pilot session recorded for every test here (a window takes a while to open)."""
    return asyncio.run(record_pilot_session(tmp_path_factory.mktemp("recorded")))


@pytest.fixture
def session_file(recorded: tuple[Path, dict[str, Any]], tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """This test's own copy of the recording."""
    path, seen = recorded
    copy = tmp_path / "session.jsonl"
    shutil.copyfile(path, copy)
    return copy, seen
