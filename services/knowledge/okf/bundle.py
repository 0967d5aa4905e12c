"""The OKF bundle validator: conformance errors and ``--strict`` lints as a list of findings.

A bundle is a folder of Markdown files; every ``.md`` that is not ``index.md`` or ``log.md`` is
one concept. Conformance errors: a non-UTF-8 file, unparseable or missing frontmatter, a missing
or empty ``type``, a reserved file carrying ``type``, frontmatter on a reserved file other than
the root ``index.md`` (which may only carry ``okf_version: "0.1"``). Strict lints (warnings):
index listing lines not shaped ``* [Title](file.md) - description``, broken links (``log.md`` is
exempt), links missing ``.md``, concepts no index lists, concepts without a title or
description. Publication requires no finding at all (``validate_tree(..., strict=True)``).

Links rooted at ``/`` are rooted in the bundle, not the file system; other relative links
resolve against the linking file's folder.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .tree import read_tree

__all__ = ["Finding", "RESERVED", "parse_frontmatter", "validate_tree", "validate_bundle", "concept_paths", "LINK_RE"]

RESERVED = frozenset({"index.md", "log.md"})
"""File names that are navigation, never concepts."""

LINK_RE = re.compile(r"(?<!!)\[([^\]\n]*)\]\(([^)\s]+)\)")
"""A Markdown inline link ``[text](target)``."""
_LISTING_RE = re.compile(r"^[*-] \[[^\]\n]+\]\([^)\s]+\.md\) - \S.*$")
_SCHEME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass(frozen=True)
class Finding:
    """One validation problem: the file, a short code, a message, and ``error`` or ``warning``."""

    path: str
    code: str
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        return f"{self.severity}: {self.path}: {self.message}"


def parse_frontmatter(text: str) -> tuple[dict[str, object] | None, str | None]:
    """``(fields, error)``: ``(None, None)`` when there is no frontmatter block.

    The frontmatter is the YAML subset OKF uses: ``key: value`` lines, quoted strings,
    ``[a, b]`` inline lists and ``- item`` block lists.
    """
    if not text.startswith("---\n") and text.strip() != "---":
        return None, None
    end = text.find("\n---", 3)
    if end < 0 or text[end + 4: end + 5] not in ("", "\n"):
        return None, "frontmatter block is not closed with '---'"
    fields: dict[str, object] = {}
    last: str | None = None
    for number, line in enumerate(text[4:end].split("\n"), start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        stripped = line.strip()
        if stripped.startswith("- ") and last is not None and line[0] in " -":
            current = fields.get(last)
            items = current if isinstance(current, list) else []
            items.append(_scalar(stripped[2:].strip()))
            fields[last] = items
            continue
        if ":" not in line or line[0].isspace():
            return None, f"frontmatter line {number} is not 'key: value'"
        key, value = line.split(":", 1)
        key = key.strip()
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_-]*$", key):
            return None, f"frontmatter line {number} has an invalid key {key!r}"
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            fields[key] = [_scalar(v.strip()) for v in value[1:-1].split(",") if v.strip()]
        else:
            fields[key] = _scalar(value)
        last = key
    return fields, None


def _scalar(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def concept_paths(tree: Mapping[str, bytes]) -> list[str]:
    """The concept files of a tree (``.md`` files that are not reserved), sorted."""
    return sorted(p for p in tree if p.endswith(".md") and posixpath.basename(p) not in RESERVED)


def _body(text: str) -> str:
    if text.startswith("---\n"):
        end = text.find("\n---", 3)
        if end >= 0:
            return text[end + 4:]
    return text


def validate_tree(tree: Mapping[str, bytes], *, strict: bool = True) -> list[Finding]:
    """Every finding for the bundle held in ``tree``; warnings only when ``strict``."""
    findings: list[Finding] = []
    texts: dict[str, str] = {}
    for path in sorted(tree):
        if not path.endswith(".md"):
            continue
        try:
            texts[path] = tree[path].decode("utf-8")
        except UnicodeDecodeError:
            findings.append(Finding(path, "encoding", "not valid UTF-8"))
    listed: set[str] = set()
    for path, text in texts.items():
        name = posixpath.basename(path)
        fields, error = parse_frontmatter(text)
        if error:
            findings.append(Finding(path, "frontmatter", error))
        if name in RESERVED:
            if fields is not None:
                if "type" in fields:
                    findings.append(Finding(path, "reserved-type", f"reserved file {name} must not carry 'type'"))
                elif path != "index.md":
                    findings.append(Finding(path, "reserved-frontmatter", "only the root index.md may have frontmatter"))
                elif set(fields) != {"okf_version"} or fields.get("okf_version") != "0.1":
                    findings.append(Finding(path, "reserved-frontmatter", 'root index.md frontmatter may only be okf_version: "0.1"'))
        elif not error:
            if fields is None:
                findings.append(Finding(path, "frontmatter", "missing frontmatter (type is required)"))
            elif not isinstance(fields.get("type"), str) or not str(fields.get("type")).strip():
                findings.append(Finding(path, "type", "missing or empty 'type'"))
            elif strict:
                for key in ("title", "description"):
                    if not str(fields.get(key) or "").strip():
                        findings.append(Finding(path, "lint-" + key, f"missing {key}", "warning"))
        folder = posixpath.dirname(path)
        for line_no, line in enumerate(_body(text).split("\n"), start=1):
            links = LINK_RE.findall(line)
            if name == "index.md" and links and line.lstrip()[:2] in ("* ", "- ") and strict:
                if not _LISTING_RE.match(line.strip()):
                    findings.append(Finding(path, "lint-listing", f"line {line_no}: listing not '* [Title](file.md) - description'", "warning"))
            for _, target in links:
                resolved = _resolve(folder, target)
                if resolved is None:
                    continue
                if name == "index.md":
                    listed.add(resolved)
                if not strict:
                    continue
                if not resolved.endswith(".md") and resolved not in tree:
                    findings.append(Finding(path, "lint-link-md", f"line {line_no}: link {target!r} does not keep .md", "warning"))
                elif name != "log.md" and resolved not in tree:
                    findings.append(Finding(path, "lint-broken-link", f"line {line_no}: broken link {target!r}", "warning"))
    if strict:
        for concept in concept_paths(tree):
            if concept in texts and concept not in listed:
                findings.append(Finding(concept, "lint-unreachable", "concept is not listed by any index.md", "warning"))
    return findings


def _resolve(folder: str, target: str) -> str | None:
    if _SCHEME_RE.match(target) or target.startswith("#"):
        return None
    target = target.split("#", 1)[0]
    if not target:
        return None
    joined = target[1:] if target.startswith("/") else posixpath.join(folder, target)
    normal = posixpath.normpath(joined)
    if normal.startswith("../") or normal == "..":
        return "../" + target
    return normal


def validate_bundle(root: Path, *, strict: bool = True) -> list[Finding]:
    """``validate_tree`` over the folder ``root`` (symlinks and hard links raise ``OkfPathError``)."""
    return validate_tree(read_tree(Path(root)), strict=strict)
