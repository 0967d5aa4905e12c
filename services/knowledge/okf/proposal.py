"""Proposals: a judgment applied to a staged base, as before/after trees and a unified diff.

``apply_judgment`` writes each promote/merge concept's text, deletes each removal, and keeps the
node's navigation whole: a new concept is listed in its node's ``index.md`` (``* [Title](rel.md)
- description``), a removed one is unlisted, and the node's append-only ``log.md`` gets one
``Harvest``/``Update``/``Removal`` line per change under today's ``## YYYY-MM-DD`` heading (newest
first; older history is never rewritten).

The proposal document is OKF's ``{version, run, attempt, created, file, before, after, changed}``
holding only what publication needs, never a copy of the whole base (version 2):
``beforeDigest``/``afterDigest`` (``tree_digest`` of the whole base before and after),
``beforeFiles`` (the sha256 of every file before, to name what changed under a judgment) and, in
``before``/``after``, the base64 bytes of the changed files only (a side without the file leaves
it out). ``read_proposal`` also reads version 1 documents, whose ``before``/``after`` were whole
trees, into the same ``ProposalDelta``.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ...clock import iso
from .bases import log_heading
from .bundle import parse_frontmatter
from .errors import ConfirmError, OkfPathError
from .limits import rel_path_problem
from .shapes import Outcome, Proposal, Removal
from .tree import Tree, canonical_json, encode_tree, sha256_hex, tree_digest

__all__ = ["FileChange", "ProposalDelta", "apply_judgment", "changed_paths", "file_changes", "proposal_document",
           "proposal_hash", "read_proposal", "unified_diff"]


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


def apply_judgment(baseline: Mapping[str, bytes], alias: str, outcomes: Iterable[Outcome],
                   removals: Iterable[Removal], nodes: Mapping[str, str], *, at: float) -> Tree:
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
        after[index_path] = (current + joint + "".join(line + "\n" for line in lines)).encode("utf-8")
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
                      after: Mapping[str, bytes], *, at: float) -> Proposal:
    """OKF's proposal document for one base: the digests of both whole trees and the changed files only."""
    changed = changed_paths(before, after)
    return {"version": 2, "run": run_id, "attempt": attempt, "created": iso(at), "file": file,
            "beforeDigest": tree_digest(before), "afterDigest": tree_digest(after), "changed": changed,
            "beforeFiles": {p: sha256_hex(data) for p, data in sorted(before.items())},
            "before": encode_tree({p: before[p] for p in changed if p in before}),
            "after": encode_tree({p: after[p] for p in changed if p in after})}


@dataclass(frozen=True)
class ProposalDelta:
    """What a proposal changes in its base: the changed paths, their bytes on each side, both digests."""

    changed: tuple[str, ...]
    before: dict[str, bytes]
    """Changed files as they were (absent: the file did not exist)."""
    after: dict[str, bytes]
    """Changed files as they become (absent: the file is removed)."""
    before_digest: str
    after_digest: str
    before_files: dict[str, str]
    """The sha256 of every file of the base before (to name the files changed since)."""

    def differing(self, tree: Mapping[str, bytes]) -> list[str]:
        """The files of ``tree`` that are not as they were before, sorted."""
        hashes = {p: sha256_hex(d) for p, d in tree.items()}
        return sorted(p for p in set(hashes) | set(self.before_files) if hashes.get(p) != self.before_files.get(p))

    def applied(self, tree: Mapping[str, bytes], side: str = "after") -> Tree:
        """``tree`` with every changed path set to its ``after`` (or ``before``) bytes."""
        target = self.after if side == "after" else self.before
        result = {p: d for p, d in tree.items() if p not in self.changed}
        result.update({p: target[p] for p in self.changed if p in target})
        return result


def _decoded(encoded: object, where: str) -> dict[str, bytes]:
    if not isinstance(encoded, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in encoded.items()):
        raise ConfirmError(f"{where} must map paths to base64 text")
    try:
        return {path: base64.b64decode(data, validate=True) for path, data in encoded.items()}
    except (binascii.Error, ValueError):
        raise ConfirmError(f"{where} holds text that is not base64") from None


def read_proposal(doc: object) -> ProposalDelta:
    """The delta of a proposal document (version 1 or 2); a malformed one raises ``ConfirmError``.

    Every changed path must be a plain relative path (``OkfPathError`` otherwise); where it may be
    written is checked again against the base at publication.
    """
    if not isinstance(doc, dict) or doc.get("version") not in (1, 2):
        raise ConfirmError("the proposal is not a version 1 or 2 proposal document")
    changed = doc.get("changed")
    if not isinstance(changed, list) or not all(isinstance(p, str) for p in changed) or len(set(changed)) != len(changed):
        raise ConfirmError("the proposal's changed list is not a list of distinct paths")
    for path in changed:
        problem = rel_path_problem(path)
        if problem:
            raise OkfPathError(f"the proposal names a path that is not inside its base: {problem}")
    before, after = _decoded(doc.get("before"), "the proposal's before"), _decoded(doc.get("after"), "the proposal's after")
    if doc["version"] == 1:
        before_digest, after_digest = tree_digest(before), tree_digest(after)
        before_files = {p: sha256_hex(d) for p, d in before.items()}
        before = {p: before[p] for p in changed if p in before}
        after = {p: after[p] for p in changed if p in after}
    else:
        digests = doc.get("beforeDigest"), doc.get("afterDigest")
        if not isinstance(digests[0], str) or not isinstance(digests[1], str):
            raise ConfirmError("the proposal has no beforeDigest/afterDigest")
        before_digest, after_digest = digests[0], digests[1]
        if not set(before) | set(after) <= set(changed):
            raise ConfirmError("the proposal carries files that are not in its changed list")
        before_files = doc.get("beforeFiles", {})
        if not isinstance(before_files, dict) or not all(isinstance(v, str) for v in before_files.values()):
            raise ConfirmError("the proposal's beforeFiles must map paths to hashes")
    return ProposalDelta(tuple(changed), before, after, before_digest, after_digest, dict(before_files))


def proposal_hash(proposal: Mapping[str, object]) -> str:
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
