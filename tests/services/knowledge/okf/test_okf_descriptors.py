"""Bindings, soul and base descriptors; ``okf init``; path rules (links, overlap, Git)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from services.knowledge.okf import (
    DirectoryBase, DirectoryBinding, OkfConfigError, OkfPathError, init_directory_base, load_bindings,
    parse_base_descriptor, parse_soul, validate_bundle,
)

from .conftest import NODES


def write_bindings(folder: Path, doc: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / "okf-bindings.json"
    file.write_text(json.dumps(doc))
    return file


def test_bindings_resolve_relative_to_their_file(tmp_path: Path) -> None:
    file = write_bindings(tmp_path / "config", {"version": 1, "stateDir": "../state",
                                                "bases": {"team": {"id": "team-knowledge", "kind": "directory", "path": "../team"}}})
    bindings = load_bindings(file)
    assert bindings.state_dir == tmp_path / "state"
    assert bindings.bases["team"] == DirectoryBinding("team", "team-knowledge", tmp_path / "team")
    assert load_bindings(file).to_json()["bases"]["team"]["path"] == "../team"


def test_git_binding_is_parsed_but_not_delivered(tmp_path: Path) -> None:
    file = write_bindings(tmp_path / "config", {"version": 1, "stateDir": "../state", "bases": {"project": {
        "id": "project-knowledge", "kind": "git", "repository": "https://example.test/p.git", "root": "knowledge",
        "acceptedBranch": "main", "pr": {"repository": "example/p"}}}})
    bindings = load_bindings(file)
    with pytest.raises(OkfConfigError, match="only directory custody"):
        bindings.directory("project")


@pytest.mark.parametrize("doc, message", [
    ({"version": 1, "stateDir": "s", "bases": {}, "extra": 1}, "unknown field"),
    ({"version": 2, "stateDir": "s", "bases": {}}, "version must be 1"),
    ({"version": 1, "bases": {}}, "stateDir"),
    ({"version": 1, "stateDir": "s", "bases": {"t": {"id": "x", "kind": "ftp", "path": "p"}}}, "kind"),
    ({"version": 1, "stateDir": "s", "bases": {"t": {"id": "__proto__", "kind": "directory", "path": "p"}}}, "not a valid id"),
])
def test_malformed_bindings_name_the_field(tmp_path: Path, doc: dict, message: str) -> None:
    file = write_bindings(tmp_path / "config", doc)
    with pytest.raises(OkfConfigError, match=message) as info:
        load_bindings(file)
    assert str(file) in str(info.value)


def test_bindings_file_must_be_absolute() -> None:
    with pytest.raises(OkfConfigError, match="absolute"):
        load_bindings(Path("relative/okf-bindings.json"))


def test_overlapping_state_and_base_refused(tmp_path: Path) -> None:
    file = write_bindings(tmp_path / "config", {"version": 1, "stateDir": "../data",
                                                "bases": {"t": {"id": "t", "kind": "directory", "path": "../data/base"}}})
    with pytest.raises(OkfPathError, match="overlaps"):
        load_bindings(file)


def test_bindings_file_inside_state_refused(tmp_path: Path) -> None:
    file = write_bindings(tmp_path / "state", {"version": 1, "stateDir": ".", "bases": {}})
    with pytest.raises(OkfPathError, match="must be outside"):
        load_bindings(file)


def test_base_inside_git_working_tree_refused(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    file = write_bindings(tmp_path / "config", {"version": 1, "stateDir": "../state",
                                                "bases": {"t": {"id": "t", "kind": "directory", "path": "../repo/kb"}}})
    with pytest.raises(OkfPathError, match="Git working tree"):
        load_bindings(file)
    with pytest.raises(OkfPathError, match="Git working tree"):
        init_directory_base(tmp_path / "repo" / "kb", "t", NODES)
    assert not (tmp_path / "repo" / "kb").exists()


def test_symlinked_base_folder_refused(tmp_path: Path) -> None:
    init_directory_base(tmp_path / "real", "team", NODES)
    os.symlink(tmp_path / "real", tmp_path / "linked")
    file = write_bindings(tmp_path / "config", {"version": 1, "stateDir": "../state",
                                                "bases": {"t": {"id": "team", "kind": "directory", "path": "../linked"}}})
    with pytest.raises(OkfPathError, match="symlink"):
        load_bindings(file)
    with pytest.raises(OkfPathError):
        DirectoryBase(DirectoryBinding("t", "team", tmp_path / "linked")).snapshot()


def test_soul_declaration_rules() -> None:
    soul = parse_soul({"version": 1, "owner": "expert-id", "owns": ["team/expert"], "reads": ["team/ops"]})
    assert soul.owns == ("team/expert",)
    with pytest.raises(OkfConfigError, match="reads is required"):
        parse_soul({"version": 1, "owner": "o", "owns": []})
    with pytest.raises(OkfConfigError, match="duplicate"):
        parse_soul({"version": 1, "owner": "o", "owns": ["a/b", "a/b"], "reads": []})
    with pytest.raises(OkfConfigError, match="not '<base>/<node>'"):
        parse_soul({"version": 1, "owner": "o", "owns": ["a"], "reads": []})


def test_overlapping_node_paths_refused() -> None:
    with pytest.raises(OkfConfigError, match="overlap"):
        parse_base_descriptor({"version": 1, "id": "b", "nodes": {"a": {"path": "x", "owner": "o"},
                                                                  "b": {"path": "x/y", "owner": "p"}}})


@pytest.mark.parametrize("path", ["../x", "/abs", "a/../b", "a//b"])
def test_escaping_node_path_refused(path: str) -> None:
    with pytest.raises((OkfPathError, OkfConfigError)):
        parse_base_descriptor({"version": 1, "id": "b", "nodes": {"a": {"path": path, "owner": "o"}}})


def test_init_builds_a_valid_base_and_refuses_an_existing_destination(tmp_path: Path) -> None:
    target = tmp_path / "team"
    init_directory_base(target, "team", NODES)
    assert validate_bundle(target) == []
    assert json.loads((target / "okf-base.json").read_text())["nodes"]["expert"] == {"path": "expert", "owner": "expert-id"}
    for rel in ("index.md", "log.md", "expert/index.md", "expert/log.md", "ops/index.md", "ops/log.md"):
        assert (target / rel).is_file()
    before = {p: p.read_bytes() for p in target.rglob("*") if p.is_file()}
    with pytest.raises(OkfPathError, match="already exists"):
        init_directory_base(target, "team", {"other": {"path": "other", "owner": "x"}})
    assert {p: p.read_bytes() for p in target.rglob("*") if p.is_file()} == before
    (tmp_path / "empty").mkdir()
    with pytest.raises(OkfPathError, match="already exists"):
        init_directory_base(tmp_path / "empty", "team", NODES)


async def test_harvest_init_base_binds_it(world) -> None:
    bindings = json.loads((world.root / "knowledge" / "okf-bindings.json").read_text())
    assert bindings["bases"]["team"] == {"id": "team-knowledge", "kind": "directory", "path": "bases/team"}
    with pytest.raises(OkfConfigError, match="already bound"):
        await world.harvest.init_base("team", NODES)
