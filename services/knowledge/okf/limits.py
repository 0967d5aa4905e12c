"""What judge output must fit before it may become files: size caps, nesting, path limits, tree shape.

A judge reply is model output. Everything it names is checked for what it must become BEFORE a
judgment is pending, and the paths again at publication:

- ``MAX_JUDGMENT_BYTES`` (2 MiB): the whole reply, in UTF-8 bytes; a larger reply is refused
  unparsed. ``MAX_CONCEPT_BYTES`` (256 KiB): one concept's text. ``MAX_DEPTH`` (32): JSON nesting
  (a judgment needs 5); deeper replies are refused, never parsed by recursion.
- Text: a lone surrogate or NUL anywhere in the reply (raw, or escaped as ``\\udc80``) is
  refused with its place; judgments are refused, never repaired (``services.text``).
- Paths (``PathLimits``): each component at most NAME_MAX bytes (``os.pathconf(folder,
  "PC_NAME_MAX")``, 255 when unknown) and the whole path, joined to the longest folder it is ever
  copied under (the base, a run's staged copy, knowledge views), under PATH_MAX bytes; no control
  characters.
- Tree shape (``shape_problems``): no component of a written path may be a file of the base before
  or after, no target may be a folder, and two outcomes cannot make one path both.
- On disk (``disk_problem``): the same against the base folder itself, empty folders included,
  through ``contained_path`` (no link on the way, nothing outside the base).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ...files import PathError, contained_path, is_git_dir_name
from ...text import text_problem, value_problem

__all__ = ["MAX_JUDGMENT_BYTES", "MAX_CONCEPT_BYTES", "MAX_DEPTH", "PathLimits", "limits_for", "parse_reply",
           "json_depth", "utf8_size", "size_words", "shape_problems", "disk_problem", "rel_path_problem"]

MAX_JUDGMENT_BYTES = 2 * 1024 * 1024
"""The largest judge reply accepted, in UTF-8 bytes."""
MAX_CONCEPT_BYTES = 256 * 1024
"""The largest concept text accepted, in UTF-8 bytes."""
MAX_DEPTH = 32
"""The deepest JSON nesting a reply may have."""

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def size_words(size: int) -> str:
    """``size`` bytes as ``2 MiB`` / ``256 KiB`` / ``17 bytes``."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} bytes"


def utf8_size(text: str) -> int:
    """How many bytes ``text`` takes in UTF-8 (lone surrogates counted as 3)."""
    return len(text.encode("utf-8", "surrogatepass"))


def json_depth(value: object, stop: int = MAX_DEPTH) -> int:
    """The nesting depth of a JSON value, counted without recursion (stops once past ``stop``)."""
    if not isinstance(value, (dict, list)):
        return 0
    deepest = 0
    stack: list[tuple[dict[object, object] | list[object], int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > stop:
            return deepest
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def parse_reply(text: object) -> tuple[object, str | None]:
    """``(value, None)`` for a reply that is storable JSON within the caps, else ``(None, reason)``.

    Never raises: size, nesting, invalid JSON, giant numbers, lone surrogates and NUL are reasons.
    """
    if not isinstance(text, str):
        return None, "the reply is not text"
    size = len(text) if len(text) > MAX_JUDGMENT_BYTES else utf8_size(text)
    if size > MAX_JUDGMENT_BYTES:
        return None, f"the reply is {size} bytes or more; a judgment is capped at {size_words(MAX_JUDGMENT_BYTES)}"
    problem = text_problem(text)
    if problem:
        return None, f"the reply is not storable text: {problem}"
    try:
        value = json.loads(text)
    except RecursionError:
        return None, f"the reply nests deeper than {MAX_DEPTH} levels"
    except ValueError as exc:  # JSONDecodeError, and integers longer than Python converts
        return None, f"the reply is not valid JSON ({exc})"
    if json_depth(value) > MAX_DEPTH:
        return None, f"the reply nests deeper than {MAX_DEPTH} levels"
    problem = value_problem(value, "judgment")
    if problem:
        return None, f"the reply carries text that cannot be stored: {problem}"
    return value, None


@dataclass(frozen=True)
class PathLimits:
    """The file-system limits a path written into one base must respect."""

    name_max: int = 255
    """The longest component, in bytes."""
    path_max: int = 4096
    """The longest absolute path plus its terminating NUL, in bytes."""
    prefix: int = 0
    """Bytes of the longest folder the path is joined to (with its slash)."""

    def problem(self, path: str) -> str | None:
        """Why ``path`` cannot be written under these limits, or None."""
        for part in path.split("/"):
            size = utf8_size(part)
            if size > self.name_max:
                return f"path component {part[:40]!r}… is {size} bytes; this file system allows {self.name_max}"
            if _CONTROL_RE.search(part):
                return f"path component {part[:40]!r} holds a control character"
        total = self.prefix + utf8_size(path)
        if total >= self.path_max:
            return f"path {path[:60]!r}… would be {total} bytes on disk; the limit is {self.path_max - 1}"
        return None


def _existing(folder: Path) -> Path:
    folder = Path(os.path.abspath(folder))
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _pathconf(folder: Path, name: str, fallback: int) -> int:
    try:
        value = os.pathconf(_existing(folder), name)
    except (OSError, ValueError):
        return fallback
    return value if isinstance(value, int) and value > 0 else fallback


def limits_for(roots: Iterable[Path]) -> PathLimits:
    """The strictest limits over every folder a base's files are written under."""
    folders = [Path(os.path.abspath(r)) for r in roots]
    if not folders:
        return PathLimits()
    return PathLimits(name_max=min(_pathconf(f, "PC_NAME_MAX", 255) for f in folders),
                      path_max=min(_pathconf(f, "PC_PATH_MAX", 4096) for f in folders),
                      prefix=max(len(os.fsencode(str(f))) + 1 for f in folders))


def rel_path_problem(path: object) -> str | None:
    """Why ``path`` is not a plain relative POSIX path of files inside a base, or None."""
    if not isinstance(path, str) or not path:
        return "path must be a non-empty string"
    if text_problem(path):
        return f"path {path[:60]!r} is not storable text"
    if "\\" in path or path.startswith("/"):
        return f"path {path!r} is not a relative POSIX path"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return f"path {path!r} escapes its node"
    if any(is_git_dir_name(part) for part in path.split("/")):
        return f"path {path!r} has a .git component"
    return None


def _folders(paths: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        parts = path.split("/")
        for end in range(1, len(parts)):
            found.add("/".join(parts[:end]))
    return found


def shape_problems(before: Mapping[str, object], after: Mapping[str, object], changed: Iterable[str]) -> list[str]:
    """Paths of ``changed`` that would need a file to be a folder or a folder to be a file."""
    files = set(before) | set(after)
    folders = _folders(files)
    problems = []
    for path in changed:
        parts = path.split("/")
        blocker = next(("/".join(parts[:end]) for end in range(1, len(parts)) if "/".join(parts[:end]) in files), None)
        if blocker is not None:
            problems.append(f"{path} cannot be written: {blocker} is a file, not a folder")
        elif path in folders:
            problems.append(f"{path} cannot be written: it is a folder holding other files")
    return problems


def disk_problem(root: Path, path: str) -> str | None:
    """Why ``path`` cannot be written or removed under the base folder ``root`` as it is now, or None."""
    try:
        target = contained_path(root, path)
        info = os.lstat(target)
    except FileNotFoundError:
        return None
    except PathError as exc:
        return str(exc)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if stat.S_ISDIR(info.st_mode):
        return f"{path} is a folder in the base"
    if not stat.S_ISREG(info.st_mode):
        return f"{path} is not a regular file in the base"
    return None
