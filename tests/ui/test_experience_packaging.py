"""Packaging metadata: classifiers, the settings dependency, and ``py.typed`` in every package."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_packages_are_marked_typed_and_shipped_with_the_marker() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for package in ("workbench", "screens", "services"):
        assert (ROOT / package / "py.typed").is_file(), package
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["*"]
    assert "Typing :: Typed" in project["project"]["classifiers"]
    assert any(dep.startswith("platformdirs") for dep in project["project"]["dependencies"])
