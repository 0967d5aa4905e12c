"""Accepted directory bases: ``okf init``, the descriptor, the cooperative lock, locked snapshots.

A directory base is a plain folder (no Git) holding ``okf-base.json``, the root ``index.md`` and
append-only ``log.md``, and one folder per node with its own ``index.md`` and ``log.md``. Its
publication lock is the folder ``<base>.okf-lock`` (an ``flock`` on ``<base>.okf-lock/lock``, which
a dead process releases by dying; the folder also holds publication temp files) and its journal is
``<base>.okf-publication.json``. While a journal exists no fresh snapshot is taken
(``RecoveryError: publication pending``); readers wait up to 10 s for the lock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from ...clock import Clock
from ...files import FileLock, publish_tree
from .bundle import validate_tree
from .descriptors import BaseDescriptor, DirectoryBinding, NodeDecl, load_json_file, parse_base_descriptor
from .errors import OkfConfigError, OkfError, OkfPathError, OkfValidationError, RecoveryError
from .tree import Tree, check_physical_dir, inside_git_worktree, read_tree, tree_digest

__all__ = ["DirectoryBase", "init_directory_base", "init_git_proposal", "new_base_tree", "log_heading", "LOCK_WAIT_S"]

LOCK_WAIT_S = 10.0
"""How long a reader waits for a base's publication lock."""


def log_heading(at: float) -> str:
    """The ``## YYYY-MM-DD`` heading a log entry made at ``at`` goes under."""
    return "## " + datetime.fromtimestamp(at, tz=timezone.utc).strftime("%Y-%m-%d")


def init_directory_base(path: Path, base_id: str, nodes: dict[str, NodeDecl] | dict[str, dict[str, str]],
                        *, at: float | None = None, clock: Clock | None = None) -> BaseDescriptor:
    """``okf init`` for a directory base: build it beside ``path`` and move it into place.

    Refuses an existing destination, a destination reached through a symlink (checked before
    anything is created), a destination inside a Git working tree and a node map that is invalid
    or overlapping. The new bundle is validated (strict) before it appears.
    """
    path = check_physical_dir(Path(path), "destination")
    if os.path.lexists(path):
        raise OkfPathError(f"destination {path} already exists; okf init never overwrites a base")
    git = inside_git_worktree(path)
    if git is not None:
        raise OkfPathError(f"destination {path} is inside the Git working tree {git}")
    at = (clock or Clock()).time() if at is None else at
    descriptor, tree = new_base_tree(base_id, nodes, at=at)
    try:
        publish_tree(path, tree)
    except FileExistsError:
        raise OkfPathError(f"destination {path} already exists; okf init never overwrites a base") from None
    return descriptor


def init_git_proposal(output: Path, base_id: str, nodes: dict[str, NodeDecl] | dict[str, dict[str, str]],
                      *, at: float) -> BaseDescriptor:
    """``okf init`` for a Git base: write the new base as a staged folder ``output`` (an operator proposal).

    Nothing is committed or pushed and nothing is accepted: the operator puts the folder at the
    base's ``root`` in their own checkout and has it reviewed and merged into the accepted branch.
    Refuses an existing ``output`` and one reached through a symlink.
    """
    output = check_physical_dir(Path(output), "output")
    if os.path.lexists(output):
        raise OkfPathError(f"output {output} already exists; okf init never overwrites")
    descriptor, tree = new_base_tree(base_id, nodes, at=at)
    try:
        publish_tree(output, tree)
    except FileExistsError:
        raise OkfPathError(f"output {output} already exists; okf init never overwrites") from None
    return descriptor


def new_base_tree(base_id: str, nodes: dict[str, NodeDecl] | dict[str, dict[str, str]], *,
                  at: float) -> tuple[BaseDescriptor, Tree]:
    """The files of a new base (descriptor, root and node indexes and logs), validated (strict)."""
    raw_nodes = {n: (d if isinstance(d, dict) else {"path": d.path, "owner": d.owner}) for n, d in nodes.items()}
    descriptor = parse_base_descriptor({"version": 1, "id": base_id, "nodes": raw_nodes}, f"nodes for {base_id}")
    heading = log_heading(at)
    tree: Tree = {
        "okf-base.json": _json_bytes(descriptor.to_json()),
        "index.md": (f'---\nokf_version: "0.1"\n---\n# {base_id}\n\n'
                     + "".join(f"* [{n}]({d.path}/index.md) - Knowledge node owned by {d.owner}.\n"
                               for n, d in descriptor.nodes.items())).encode(),
        "log.md": f"# Log\n\n{heading}\n\n* **Creation**: base {base_id} created.\n".encode(),
    }
    for name, node in descriptor.nodes.items():
        tree[f"{node.path}/index.md"] = f"# {name}\n\n".encode()
        tree[f"{node.path}/log.md"] = f"# Log\n\n{heading}\n\n* **Creation**: node {name} created.\n".encode()
    findings = validate_tree(tree)
    if findings:
        raise OkfValidationError(f"new base {base_id} does not validate", findings)
    return descriptor, tree


def _json_bytes(value: object) -> bytes:
    import json

    return (json.dumps(value, indent=2) + "\n").encode()


class DirectoryBase:
    """One bound directory base: its paths, descriptor, lock and locked reads."""

    def __init__(self, binding: DirectoryBinding) -> None:
        self.binding = binding
        self.alias = binding.alias
        self.path = binding.path
        self.lock_dir = Path(f"{binding.path}.okf-lock")
        self.journal_path = Path(f"{binding.path}.okf-publication.json")

    def descriptor(self) -> BaseDescriptor:
        """The base's ``okf-base.json``; its id must equal the binding's."""
        self.check_plain()
        descriptor = parse_base_descriptor(load_json_file(self.path / "okf-base.json", "base descriptor"),
                                           str(self.path / "okf-base.json"))
        if descriptor.id != self.binding.id:
            raise OkfConfigError(f"base {self.alias!r}: okf-base.json id {descriptor.id!r} != bound id {self.binding.id!r}")
        return descriptor

    def check_plain(self) -> None:
        """Refuse a base folder that is missing, a symlink, or inside Git."""
        if not os.path.lexists(self.path):
            raise OkfConfigError(f"base {self.alias!r}: {self.path} does not exist")
        if os.path.islink(self.path) or not self.path.is_dir():
            raise OkfPathError(f"base {self.alias!r}: {self.path} is not a plain folder")
        git = inside_git_worktree(self.path)
        if git is not None:
            raise OkfPathError(f"base {self.alias!r}: {self.path} is inside the Git working tree {git}")

    def lock(self) -> FileLock:
        """The cooperative publication lock (a fresh handle each call)."""
        self.lock_dir.mkdir(exist_ok=True)
        if os.path.islink(self.lock_dir):
            raise OkfPathError(f"{self.lock_dir} is a symlink")
        if os.stat(self.lock_dir).st_dev != os.stat(self.path).st_dev:
            raise OkfPathError(f"{self.lock_dir} is on another device than {self.path}")
        return FileLock(self.lock_dir / "lock")

    @contextmanager
    def locked(self, wait_s: float | None = None) -> Iterator[None]:
        """Hold the lock, waiting at most ``wait_s`` (default ``LOCK_WAIT_S``; then ``RecoveryError``)."""
        lock = self.lock()
        deadline = time.monotonic() + (LOCK_WAIT_S if wait_s is None else wait_s)
        while not lock.try_acquire():
            if time.monotonic() >= deadline:
                raise RecoveryError(f"base {self.alias!r} is locked by another publication")
            time.sleep(0.02)
        try:
            yield
        finally:
            lock.release()

    def journal_pending(self) -> bool:
        """True while a publication journal exists."""
        return os.path.lexists(self.journal_path)

    def read_unlocked(self) -> Tree:
        """The base's files (the caller holds the lock)."""
        self.check_plain()
        return read_tree(self.path)

    def snapshot(self) -> tuple[Tree, str]:
        """``(tree, digest)`` read under the lock; refused while a journal is pending or an index is missing."""
        descriptor = self.descriptor()
        with self.locked():
            if self.journal_pending():
                raise RecoveryError(f"base {self.alias!r}: publication pending; it must recover first")
            tree = self.read_unlocked()
        needed = ["index.md", "log.md"] + [f"{n.path}/{f}" for n in descriptor.nodes.values() for f in ("index.md", "log.md")]
        missing = [rel for rel in needed if rel not in tree]
        if missing:
            raise OkfError(f"base {self.alias!r} is missing {', '.join(missing)}; bases are never bootstrapped silently",
                           code="E_INDEX")
        return tree, tree_digest(tree)
