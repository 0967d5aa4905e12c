"""Packaging metadata: classifiers, the license, the settings dependency, and ``py.typed`` in every package."""

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


def test_the_license_is_declared_once_and_shipped() -> None:
    """MIT as an SPDX expression with its file; no ``License ::`` classifier beside it (setuptools 77+
    refuses the pair), a backend new enough to read the expression, and no made-up project URLs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    meta = project["project"]
    assert meta["license"] == "MIT"
    assert meta["license-files"] == ["LICENSE"]
    assert not any(c.startswith("License ::") for c in meta["classifiers"])
    assert "urls" not in meta
    assert project["build-system"]["requires"] == ["setuptools>=77"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License") and "Copyright (c) 2026 The workbench authors" in text
    assert "THE SOFTWARE IS PROVIDED \"AS IS\"" in text
