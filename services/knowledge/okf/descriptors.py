"""The three OKF descriptors: the bindings file, the soul's ``okf.json`` and a base's ``okf-base.json``.

Shapes (exactly OKF's):

- bindings: ``{version: 1, stateDir, cron?, tz?, bases: {<alias>: {id, kind: "directory", path}
  | {id, kind: "git", repository, root, acceptedBranch, pr: {repository}}}}``; paths resolve
  against the bindings file's own folder; no other keys.
- soul: ``{version: 1, owner, owns: ["<base>/<node>"], reads: ["<base>/<node>"]}``, all required,
  entries unique.
- base: ``{version: 1, id, nodes: {<node>: {path, owner}}}``, at least one node; node paths are
  relative, non-overlapping folders.

Every parse function raises ``OkfConfigError`` naming the file and the field.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ...files import CorruptFileError, read_json
from .errors import OkfConfigError, OkfPathError
from .git_urls import check_option_free, check_repository, remember, split_credentials
from .shapes import DeclDoc
from .tree import check_physical_dir, inside_git_worktree

__all__ = [
    "ID_PATTERN",
    "DirectoryBinding",
    "GitBinding",
    "Bindings",
    "SoulDecl",
    "NodeDecl",
    "BaseDescriptor",
    "check_id",
    "git_binding",
    "load_json_file",
    "parse_bindings",
    "load_bindings",
    "parse_soul",
    "load_soul",
    "parse_base_descriptor",
    "check_node_path",
    "check_binding_paths",
    "binding_path_problems",
]

ID_PATTERN = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{0,95}$")
"""The pattern every OKF id, alias and node name matches."""
_BANNED_IDS = frozenset({"constructor", "__proto__", "prototype", "hasOwnProperty", "toString", "valueOf"})


def check_id(value: object, where: str) -> str:
    """``value`` when it is a valid OKF id; else ``OkfConfigError`` naming ``where``."""
    if not isinstance(value, str) or not ID_PATTERN.match(value) or value in _BANNED_IDS:
        raise OkfConfigError(f"{where}: {value!r} is not a valid id ([a-zA-Z0-9][a-zA-Z0-9._-]{{0,95}})")
    return value


def _only_keys(data: dict[str, object], allowed: set[str], where: str) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        raise OkfConfigError(f"{where}: unknown field(s) {', '.join(extra)}")


def _require_dict(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise OkfConfigError(f"{where}: must be a JSON object")
    return value


def _version(data: dict[str, object], where: str) -> None:
    if data.get("version") != 1:
        raise OkfConfigError(f"{where}: version must be 1")


def load_json_file(path: Path, what: str) -> object:
    """Read a descriptor file; a missing or corrupt file raises ``OkfConfigError`` naming it."""
    try:
        return read_json(path)
    except FileNotFoundError:
        raise OkfConfigError(f"{what} {path} is missing") from None
    except CorruptFileError as exc:
        raise OkfConfigError(f"{what} {exc}") from None


@dataclass(frozen=True)
class DirectoryBinding:
    """A directory-custody base: ``{id, kind: "directory", path}`` with ``path`` resolved."""

    alias: str
    id: str
    path: Path
    kind: str = "directory"

    def to_json(self, relative_to: Path) -> dict[str, object]:
        """The binding as it is written in a bindings file next to ``relative_to``."""
        return {"id": self.id, "kind": "directory", "path": os.path.relpath(self.path, relative_to)}


@dataclass(frozen=True)
class GitBinding:
    """A Git-custody base (parsed and kept so a Git provider can be added; not delivered here)."""

    alias: str
    id: str
    repository: str
    root: str
    accepted_branch: str
    pr_repository: str
    kind: str = "git"

    def to_json(self, relative_to: Path) -> dict[str, object]:
        """The binding as written in a bindings file."""
        return {"id": self.id, "kind": "git", "repository": self.repository, "root": self.root,
                "acceptedBranch": self.accepted_branch, "pr": {"repository": self.pr_repository}}


def git_binding(alias: str, base_id: str, repository: str, root: str, accepted_branch: str, pr_repository: str,
                where: str) -> GitBinding:
    """A checked ``GitBinding``: no value git could read as an option, an allowed transport, and the
    repository without user information (its credentials kept in memory only: ``git_urls``)."""
    check_repository(repository, f"{where}.repository")
    check_option_free(root, f"{where}.root")
    check_option_free(accepted_branch, f"{where}.acceptedBranch")
    check_option_free(pr_repository, f"{where}.pr.repository")
    public, credentials = split_credentials(repository)
    remember(public, credentials)
    return GitBinding(alias, base_id, public, root, accepted_branch, split_credentials(pr_repository)[0])


@dataclass(frozen=True)
class Bindings:
    """A loaded bindings file."""

    file: Path
    state_dir: Path
    bases: dict[str, DirectoryBinding | GitBinding]
    cron: str = "*/15 * * * *"
    tz: str = "UTC"

    def to_json(self) -> dict[str, object]:
        """The bindings as written on disk (paths relative to the file's folder)."""
        folder = self.file.parent
        return {"version": 1, "stateDir": os.path.relpath(self.state_dir, folder), "cron": self.cron,
                "tz": self.tz, "bases": {a: b.to_json(folder) for a, b in self.bases.items()}}

    def directory(self, alias: str) -> DirectoryBinding:
        """The directory binding named ``alias``."""
        binding = self.bases.get(alias)
        if binding is None:
            raise OkfConfigError(f"{self.file}: no base {alias!r}")
        if not isinstance(binding, DirectoryBinding):
            raise OkfConfigError(f"base {alias!r} is a {binding.kind} base; only directory custody is delivered here")
        return binding


def parse_bindings(data: object, file: Path, *, check_paths: bool = True) -> Bindings:
    """Validate a bindings document; with ``check_paths`` also its path rules (physical, apart, no Git)."""
    where = str(file)
    doc = _require_dict(data, where)
    _only_keys(doc, {"version", "stateDir", "cron", "tz", "bases"}, where)
    _version(doc, where)
    if not Path(file).is_absolute():
        raise OkfConfigError(f"bindings file must be an absolute path, got {file}")
    folder = Path(file).parent
    state = doc.get("stateDir")
    if not isinstance(state, str) or not state:
        raise OkfConfigError(f"{where}: stateDir must be a non-empty string")
    bases_doc = _require_dict(doc.get("bases", None), f"{where}: bases")
    bases: dict[str, DirectoryBinding | GitBinding] = {}
    for alias, raw in bases_doc.items():
        check_id(alias, f"{where}: base alias")
        entry = _require_dict(raw, f"{where}: bases.{alias}")
        kind = entry.get("kind")
        if kind == "directory":
            _only_keys(entry, {"id", "kind", "path"}, f"{where}: bases.{alias}")
            relative = entry.get("path")
            if not isinstance(relative, str) or not relative:
                raise OkfConfigError(f"{where}: bases.{alias}.path must be a non-empty string")
            path = Path(os.path.normpath(folder / relative))
            bases[alias] = DirectoryBinding(alias, check_id(entry.get("id"), f"{where}: bases.{alias}.id"), path)
        elif kind == "git":
            _only_keys(entry, {"id", "kind", "repository", "root", "acceptedBranch", "pr"}, f"{where}: bases.{alias}")
            pr = _require_dict(entry.get("pr"), f"{where}: bases.{alias}.pr")
            fields = [entry.get("repository"), entry.get("root"), entry.get("acceptedBranch"), pr.get("repository")]
            texts = [v for v in fields if isinstance(v, str) and v]
            if len(texts) != len(fields):
                raise OkfConfigError(f"{where}: bases.{alias} needs repository, root, acceptedBranch and pr.repository")
            repository, root, accepted, pr_repository = texts
            bases[alias] = git_binding(alias, check_id(entry.get("id"), f"{where}: bases.{alias}.id"), repository, root,
                                       accepted, pr_repository, f"{where}: bases.{alias}")
        else:
            raise OkfConfigError(f"{where}: bases.{alias}.kind must be 'directory' or 'git'")
    bindings = Bindings(Path(file), Path(os.path.normpath(folder / state)), bases,
                        str(doc.get("cron", "*/15 * * * *")), str(doc.get("tz", "UTC")))
    if check_paths:
        check_binding_paths(bindings)
    return bindings


def _overlaps(a: Path, b: Path) -> bool:
    return a == b or a.is_relative_to(b) or b.is_relative_to(a)


def check_binding_paths(bindings: Bindings) -> None:
    """Physical, non-overlapping state and base paths, outside Git; the bindings file outside them all."""
    problems = binding_path_problems(bindings)
    if problems:
        raise OkfPathError(next(iter(problems.values())))


def binding_path_problems(bindings: Bindings) -> dict[str, str]:
    """``check_binding_paths`` as ``{"stateDir" or base alias: why}`` (empty when all is well).

    Lets a workspace open with the usable bases while a broken one is reported, not fatal.
    """
    problems: dict[str, str] = {}
    places: list[tuple[str, str, Path]] = []
    try:
        places.append(("stateDir", "stateDir", check_physical_dir(bindings.state_dir, "stateDir")))
    except OkfPathError as exc:
        problems["stateDir"] = exc.detail
    for alias, binding in bindings.bases.items():
        if not isinstance(binding, DirectoryBinding):
            continue
        try:
            path = check_physical_dir(binding.path, f"base {alias!r}")
        except OkfPathError as exc:
            problems[alias] = exc.detail
            continue
        git = inside_git_worktree(path)
        if git is not None:
            problems[alias] = (f"base {alias!r} at {path} is inside the Git working tree {git}; "
                               "directory custody must live outside Git")
            continue
        places.append((alias, f"base {alias!r}", path))
        places.append((alias, f"base {alias!r} lock", Path(f"{path}.okf-lock")))
        places.append((alias, f"base {alias!r} journal", Path(f"{path}.okf-publication.json")))
    for i, (key_a, name_a, a) in enumerate(places):
        for key_b, name_b, b in places[i + 1:]:
            if key_a != key_b and _overlaps(a, b):
                for key in (key_a, key_b):
                    problems.setdefault(key, f"{name_a} ({a}) overlaps {name_b} ({b})")
    file = Path(os.path.abspath(bindings.file))
    for key, name, place in places:
        if file.is_relative_to(place):
            problems.setdefault(key, f"the bindings file {file} must be outside {name} ({place})")
    return problems


def load_bindings(file: Path, *, check_paths: bool = True) -> Bindings:
    """Read and validate the bindings file at the absolute path ``file`` (``check_paths``: see ``parse_bindings``)."""
    if not Path(file).is_absolute():
        raise OkfConfigError(f"bindings file must be an absolute path, got {file}")
    return parse_bindings(load_json_file(Path(file), "bindings file"), Path(file), check_paths=check_paths)


@dataclass(frozen=True)
class SoulDecl:
    """A soul's ``okf.json``: its stable owner id and the ``<base>/<node>`` it owns and reads."""

    owner: str
    owns: tuple[str, ...]
    reads: tuple[str, ...] = ()

    def to_json(self) -> DeclDoc:
        """The declaration as written on disk."""
        return {"version": 1, "owner": self.owner, "owns": list(self.owns), "reads": list(self.reads)}


def _node_refs(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise OkfConfigError(f"{where} must be a list of '<base>/<node>'")
    if len(set(map(str, value))) != len(value):
        raise OkfConfigError(f"{where} has duplicate entries")
    for ref in value:
        parts = ref.split("/") if isinstance(ref, str) else []
        if len(parts) != 2:
            raise OkfConfigError(f"{where}: {ref!r} is not '<base>/<node>'")
        check_id(parts[0], where)
        check_id(parts[1], where)
    return tuple(value)


def parse_soul(data: object, where: str = "okf.json") -> SoulDecl:
    """Validate a soul declaration document."""
    doc = _require_dict(data, where)
    _only_keys(doc, {"version", "owner", "owns", "reads"}, where)
    _version(doc, where)
    for key in ("owner", "owns", "reads"):
        if key not in doc:
            raise OkfConfigError(f"{where}: {key} is required")
    return SoulDecl(check_id(doc["owner"], f"{where}: owner"), _node_refs(doc["owns"], f"{where}: owns"),
                    _node_refs(doc["reads"], f"{where}: reads"))


def load_soul(path: Path) -> SoulDecl:
    """Read and validate ``soul/okf.json``."""
    return parse_soul(load_json_file(Path(path), "soul declaration"), str(path))


@dataclass(frozen=True)
class NodeDecl:
    """One node of a base: its folder (relative to the base root) and its one stable owner."""

    path: str
    owner: str


@dataclass(frozen=True)
class BaseDescriptor:
    """A base's ``okf-base.json``."""

    id: str
    nodes: dict[str, NodeDecl] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """The descriptor as written on disk."""
        return {"version": 1, "id": self.id,
                "nodes": {n: {"path": d.path, "owner": d.owner} for n, d in self.nodes.items()}}


def check_node_path(value: object, where: str) -> str:
    """A node path: relative, plain POSIX components, no ``..``, no trailing slash."""
    if not isinstance(value, str) or not value or "\x00" in value or "\\" in value:
        raise OkfConfigError(f"{where}: node path must be a non-empty relative path")
    pure = PurePosixPath(value)
    if pure.is_absolute() or any(p in ("..", ".", "") for p in value.split("/")):
        raise OkfPathError(f"{where}: node path {value!r} escapes the base")
    for part in pure.parts:
        check_id(part, f"{where}: node path component")
    return value


def parse_base_descriptor(data: object, where: str = "okf-base.json") -> BaseDescriptor:
    """Validate an ``okf-base.json`` document (node paths relative and non-overlapping)."""
    doc = _require_dict(data, where)
    _only_keys(doc, {"version", "id", "nodes"}, where)
    _version(doc, where)
    nodes_doc = _require_dict(doc.get("nodes"), f"{where}: nodes")
    if not nodes_doc:
        raise OkfConfigError(f"{where}: nodes must declare at least one node")
    nodes: dict[str, NodeDecl] = {}
    for name, raw in nodes_doc.items():
        check_id(name, f"{where}: node name")
        entry = _require_dict(raw, f"{where}: nodes.{name}")
        _only_keys(entry, {"path", "owner"}, f"{where}: nodes.{name}")
        nodes[name] = NodeDecl(check_node_path(entry.get("path"), f"{where}: nodes.{name}.path"),
                               check_id(entry.get("owner"), f"{where}: nodes.{name}.owner"))
    names = list(nodes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            pa, pb = PurePosixPath(nodes[a].path), PurePosixPath(nodes[b].path)
            if pa == pb or pa.is_relative_to(pb) or pb.is_relative_to(pa):
                raise OkfConfigError(f"{where}: nodes {a!r} ({pa}) and {b!r} ({pb}) overlap")
    return BaseDescriptor(check_id(doc.get("id"), f"{where}: id"), nodes)
