"""File trees as data: read a folder into ``{relative path: bytes}``, digest it, encode it.

A base, a staged copy and a proposal's before/after are all trees. ``read_tree`` refuses
symlinks (files or folders), hard-linked files and special files instead of following them, so
nothing outside the tree is ever read. ``tree_digest`` is a sha256 over the sorted JSON of the
``{path: base64}`` form, the digest every baseline, receipt and view names.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from .errors import OkfPathError

__all__ = [
    "Tree",
    "read_tree",
    "tree_digest",
    "encode_tree",
    "decode_tree",
    "sha256_hex",
    "canonical_json",
    "check_physical_dir",
    "inside_git_worktree",
]

Tree = dict[str, bytes]
"""A folder's regular files: POSIX relative path -> bytes."""


def sha256_hex(data: bytes) -> str:
    """The hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def canonical_json(value: object) -> bytes:
    """``value`` as compact, key-sorted UTF-8 JSON (the form every hash is taken over)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def encode_tree(tree: Mapping[str, bytes]) -> dict[str, str]:
    """``{path: base64}`` for a tree."""
    return {path: base64.b64encode(data).decode("ascii") for path, data in sorted(tree.items())}


def decode_tree(encoded: Mapping[str, str]) -> Tree:
    """The inverse of ``encode_tree``."""
    return {path: base64.b64decode(data) for path, data in encoded.items()}


def tree_digest(tree: Mapping[str, bytes]) -> str:
    """``sha256-<hex>`` over the sorted ``{path: base64}`` JSON of ``tree``."""
    return "sha256-" + sha256_hex(canonical_json(encode_tree(tree)))


def read_tree(root: Path, *, skip: frozenset[str] = frozenset()) -> Tree:
    """Every regular file under ``root``; a symlink, hard link or special file raises ``OkfPathError``."""
    root = Path(root)
    info = os.lstat(root)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise OkfPathError(f"{root}: not a plain folder")
    tree: Tree = {}
    stack = [""]
    while stack:
        rel = stack.pop()
        folder = root / rel if rel else root
        with os.scandir(folder) as entries:
            for entry in entries:
                name = f"{rel}/{entry.name}" if rel else entry.name
                if name in skip:
                    continue
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    raise OkfPathError(f"{root}: symlink not allowed: {name}")
                if stat.S_ISDIR(st.st_mode):
                    stack.append(name)
                elif stat.S_ISREG(st.st_mode):
                    if st.st_nlink > 1:
                        raise OkfPathError(f"{root}: hard-linked file not allowed: {name}")
                    tree[name] = _read_regular(root / name)
                else:
                    raise OkfPathError(f"{root}: not a regular file: {name}")
    return tree


def _read_regular(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            raise OkfPathError(f"{path}: not a plain regular file")
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_physical_dir(path: Path, what: str) -> Path:
    """``path`` made absolute; refuses it when any existing component is a symlink."""
    absolute = Path(os.path.abspath(path))
    if os.path.realpath(absolute) != str(absolute):
        raise OkfPathError(f"{what} {absolute} is reached through a symlink; use the physical path")
    return absolute


def inside_git_worktree(path: Path) -> Path | None:
    """The folder holding ``.git`` when ``path`` (or an ancestor) is inside a Git working tree."""
    current = Path(os.path.abspath(path))
    for folder in (current, *current.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return None
