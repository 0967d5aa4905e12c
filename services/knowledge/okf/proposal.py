"""Proposals: a judgment applied to a staged base, as before/after trees and a unified diff.

``apply_judgment`` writes each promote/merge concept's text, deletes each removal, and keeps the
node's navigation whole: a new concept is listed in its node's ``index.md`` (``* [Title](rel.md)
- description``), a removed one is unlisted, and the node's append-only ``log.md`` gets one
``Harvest``/``Update``/``Removal`` line per change under today's ``## YYYY-MM-DD`` heading (newest
first; older history is never rewritten). The proposal document is OKF's
``{version, run, attempt, created, file, before, after, changed}`` with base64 trees.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...clock import iso
from .bases import log_heading
from .bundle import parse_frontmatter
from .tree import Tree, canonical_json, encode_tree, sha256_hex

__all__ = ["FileChange", "apply_judgment", "changed_paths", "file_changes", "proposal_document",
           "proposal_hash", "unified_diff"]


@dataclass(frozen=True)
class FileChange:
    """One changed file of a proposal: before and after text (None when absent) and its diff."""

    base: str
    path: str
    before: str | None
    after: str | None
    diff: str


def _title(text: str, path: str) -> tuple[str, str]:
    fields, _ = parse_frontmatter(text)
    fields = fields or {}
    stem = posixpath.basename(path).removesuffix(".md")
    title = re.sub(r"[\[\]\n]", " ", str(fields.get("title") or stem)).strip() or stem
    description = re.sub(r"\s+", " ", str(fields.get("description") or title)).strip()
    return title, description


def _node_of(path: str, nodes: Mapping[str, str]) -> str | None:
    for node_path in nodes.values():
        if path.startswith(node_path + "/"):
            return node_path
    return None


def _add_log(log: str, heading: str, lines: list[str]) -> str:
    entries = "".join(line + "\n" for line in lines)
    rows = log.split("\n")
    for index, row in enumerate(rows):
        if row.startswith("## "):
            if row.strip() == heading:
                insert_at = index + 1
                while insert_at < len(rows) and not rows[insert_at].strip():
                    insert_at += 1
                return "\n".join(rows[:insert_at]) + "\n" + entries + "\n".join(rows[insert_at:])
            return "\n".join(rows[:index]) + f"\n{heading}\n\n" + entries + "\n" + "\n".join(rows[index:])
    return log.rstrip("\n") + f"\n\n{heading}\n\n" + entries


def apply_judgment(baseline: Mapping[str, bytes], alias: str, outcomes: Iterable[Mapping[str, Any]],
                   removals: Iterable[Mapping[str, Any]], nodes: Mapping[str, str], *, at: float) -> Tree:
    """The after-tree of ``alias`` once ``outcomes`` and ``removals`` are applied to ``baseline``.

    ``nodes`` maps owned node name -> node path. Concepts of other bases are ignored.
    """
    after: Tree = dict(baseline)
    log_lines: dict[str, list[str]] = {}
    listings: dict[str, list[str]] = {}
    for outcome in outcomes:
        for concept in outcome.get("concepts", []):
            if concept.get("base") != alias:
                continue
            path = concept["path"]
            node = _node_of(path, nodes)
            if node is None:
                continue
            text = str(concept.get("text", ""))
            is_new = path not in baseline and path not in after
            already = after.get(path)
            after[path] = text.encode("utf-8")
            if already is not None and already == after[path] and path not in baseline:
                continue
            title, description = _title(text, path)
            if is_new:
                listings.setdefault(node, []).append(f"* [{title}]({posixpath.relpath(path, node)}) - {description}")
            kind = "Harvest" if outcome.get("verdict") == "promote" else "Update"
            log_lines.setdefault(node, []).append(
                f"* **{kind}**: {outcome.get('verdict')} [{title}](/{path}) from input `{str(outcome.get('input'))[:12]}`.")
    for removal in removals:
        if removal.get("base") != alias:
            continue
        path = removal["path"]
        node = _node_of(path, nodes)
        if node is None or path not in after:
            continue
        del after[path]
        reason = re.sub(r"\s+", " ", str(removal.get("reason", ""))).strip()
        for index_path in [p for p in after if p.startswith(node + "/") and posixpath.basename(p) == "index.md"]:
            target_rel = posixpath.relpath(path, posixpath.dirname(index_path))
            rows = after[index_path].decode("utf-8").split("\n")
            kept = [r for r in rows if f"]({target_rel})" not in r and f"](/{path})" not in r]
            after[index_path] = "\n".join(kept).encode("utf-8")
        log_lines.setdefault(node, []).append(f"* **Removal**: removed [{path}](/{path}): {reason}")
    for node, lines in listings.items():
        index_path = f"{node}/index.md"
        current = after.get(index_path, b"").decode("utf-8").rstrip("\n")
        last = current.rsplit("\n", 1)[-1]
        joint = "\n" if last.startswith(("* [", "- [")) else "\n\n"
        after[index_path] = (current + joint + "".join(l + "\n" for l in lines)).encode("utf-8")
    heading = log_heading(at)
    for node, lines in log_lines.items():
        log_path = f"{node}/log.md"
        current = after.get(log_path, b"# Log\n").decode("utf-8")
        after[log_path] = _add_log(current, heading, list(reversed(lines))).encode("utf-8")
    return after


def changed_paths(before: Mapping[str, bytes], after: Mapping[str, bytes]) -> list[str]:
    """Paths added, removed or changed between two trees, sorted."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def proposal_document(run_id: str, attempt: int, file: str, before: Mapping[str, bytes],
                      after: Mapping[str, bytes], *, at: float) -> dict[str, Any]:
    """OKF's proposal document for one base."""
    return {"version": 1, "run": run_id, "attempt": attempt, "created": iso(at), "file": file,
            "before": encode_tree(before), "after": encode_tree(after), "changed": changed_paths(before, after)}


def proposal_hash(proposal: Mapping[str, Any]) -> str:
    """The hash a receipt and the journal carry for a proposal."""
    return "sha256-" + sha256_hex(canonical_json(dict(proposal)))


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


def unified_diff(path: str, before: str | None, after: str | None) -> str:
    """A unified diff of one file (``/dev/null`` for a missing side)."""
    return "".join(difflib.unified_diff(
        (before or "").splitlines(keepends=True), (after or "").splitlines(keepends=True),
        fromfile=f"a/{path}" if before is not None else "/dev/null",
        tofile=f"b/{path}" if after is not None else "/dev/null"))


def file_changes(alias: str, before: Mapping[str, bytes], after: Mapping[str, bytes]) -> list[FileChange]:
    """Every changed file of one base with its before/after text and diff."""
    changes = []
    for path in changed_paths(before, after):
        b, a = _text(before.get(path)), _text(after.get(path))
        changes.append(FileChange(alias, path, b, a, unified_diff(f"{alias}/{path}", b, a)))
    return changes
