"""The judgment validator: every OKF rule for ``judgment.json``, then full strict validation.

Shape: ``{version: 1, exclusionsReviewed: true, outcomes: [{input, verdict, reason, concepts:
[{base, path, text}]}], removals: [{base, path, reason}]}``. Rules (each broken rule is one
problem, prefixed by its code):

- ``E_JUDGMENT``: a reply over ``MAX_JUDGMENT_BYTES`` (2 MiB), nested deeper than ``MAX_DEPTH``,
  carrying a lone surrogate or NUL, not JSON or not the shape (``limits.parse_reply``: parsing
  never raises); an outcome missing for a run input, a duplicate outcome, an outcome for an input
  not in the run; an unknown verdict or an empty reason; ``drop`` with concepts,
  ``promote``/``merge`` without; a concept path that is absolute, has ``..``, is not under an
  owned node, does not end in ``.md``, names ``index.md``/``log.md``, or breaks the file system's
  limits (``PathLimits``: NAME_MAX per component, PATH_MAX whole); a concept text over
  ``MAX_CONCEPT_BYTES`` (256 KiB) or not containing its input hash; ``merge`` into a concept that
  does not exist; two outcomes giving one path different texts; a removal without a reason,
  outside the owned nodes or of a file that does not exist; a written path whose component is a
  file or which is itself a folder, in the baseline, in the result, or (given ``roots``) on disk.
- ``E_EXCLUSION``: credential-shaped text (PEM private keys, ``ghp_``, ``github_pat_``,
  ``sk_live_``) in a concept or a reason.
- ``E_VALIDATION``: the resulting base fails strict OKF validation.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .bundle import RESERVED, validate_tree
from .limits import (MAX_CONCEPT_BYTES, PathLimits, disk_problem, parse_reply, rel_path_problem, shape_problems,
                     size_words, utf8_size)
from .proposal import apply_judgment, changed_paths
from .shapes import JsonObject, StagingEntry
from .tree import Tree

__all__ = ["CREDENTIAL_RE", "JudgmentCheck", "check_judgment", "owned_node_paths", "write_problems", "VERDICTS"]

CREDENTIAL_RE = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----|\bghp_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}|\bsk_live_[A-Za-z0-9]{8,}")
"""Credential-shaped text that is never accepted into knowledge."""
VERDICTS = ("promote", "merge", "drop")
"""The three outcomes an input can get."""


@dataclass(frozen=True)
class JudgmentCheck:
    """The result of checking a judgment: the parsed judgment, its problems and the after-trees."""

    judgment: JsonObject | None
    problems: tuple[str, ...]
    afters: dict[str, Tree] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        """True when no rule is broken."""
        return not self.problems


def owned_node_paths(stage: StagingEntry) -> dict[str, str]:
    """The owned node name -> path map of one staging entry."""
    if stage.get("settled"):
        return {}
    return {n: stage["nodes"][n]["path"] for n in stage.get("owned", [])}


def _path_problem(path: object, nodes: Mapping[str, str], limits: PathLimits) -> str | None:
    problem = rel_path_problem(path)
    if problem or not isinstance(path, str):
        return problem
    if not path.endswith(".md"):
        return f"path {path!r} does not end in .md"
    if posixpath.basename(path) in RESERVED:
        return f"path {path!r} is navigation, not a concept"
    if not any(path.startswith(p + "/") for p in nodes.values()):
        return f"path {path!r} is not inside an owned node ({', '.join(sorted(nodes.values())) or 'none'})"
    return limits.problem(path)


def check_judgment(text: str, *, inputs: Sequence[str], staging: Mapping[str, StagingEntry],
                   baselines: Mapping[str, Tree], at: float, limits: Mapping[str, PathLimits] | None = None,
                   roots: Mapping[str, Path] | None = None) -> JudgmentCheck:
    """Check the judgment ``text`` for a run of ``inputs`` staged as ``staging`` over ``baselines``.

    ``limits`` gives each base's file-system limits (default: 255-byte names, 4096-byte paths);
    ``roots`` the base folders, whose current files and folders the written paths are checked
    against too. Never raises for anything the reply holds.
    """
    problems: list[str] = []
    judgment, reason = parse_reply(text)
    if reason is not None:
        return JudgmentCheck(None, (f"E_JUDGMENT: {reason}",))
    if not isinstance(judgment, dict):
        return JudgmentCheck(None, ("E_JUDGMENT: judgment must be a JSON object",))
    extra = sorted(set(judgment) - {"version", "exclusionsReviewed", "outcomes", "removals"})
    if extra:
        problems.append(f"E_JUDGMENT: unknown field(s) {', '.join(extra)}")
    if judgment.get("version") != 1:
        problems.append("E_JUDGMENT: version must be 1")
    if judgment.get("exclusionsReviewed") is not True:
        problems.append("E_JUDGMENT: exclusionsReviewed must be true")
    outcomes = judgment.get("outcomes")
    removals = judgment.get("removals", [])
    if not isinstance(outcomes, list) or not all(isinstance(o, dict) for o in outcomes):
        return JudgmentCheck(judgment, tuple(problems + ["E_JUDGMENT: outcomes must be a list of objects"]))
    if not isinstance(removals, list) or not all(isinstance(r, dict) for r in removals):
        return JudgmentCheck(judgment, tuple(problems + ["E_JUDGMENT: removals must be a list of {base, path, reason}"]))
    wanted = list(inputs)
    seen: set[str] = set()
    texts: dict[tuple[str, str], str] = {}
    for number, outcome in enumerate(outcomes):
        where = f"outcome {number}"
        input_id = outcome.get("input")
        if not isinstance(input_id, str) or input_id not in wanted:
            problems.append(f"E_JUDGMENT: {where}: input {input_id!r} is not an input of this run")
        elif input_id in seen:
            problems.append(f"E_JUDGMENT: {where}: duplicate outcome for input {input_id}")
        else:
            seen.add(input_id)
            where = f"outcome for {input_id[:12]}"
        verdict = outcome.get("verdict")
        if verdict not in VERDICTS:
            problems.append(f"E_JUDGMENT: {where}: verdict {verdict!r} is not promote, merge or drop")
        reason = outcome.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            problems.append(f"E_JUDGMENT: {where}: a reason is required")
        elif CREDENTIAL_RE.search(reason):
            problems.append(f"E_EXCLUSION: {where}: the reason carries credential-shaped text")
        concepts = outcome.get("concepts")
        if not isinstance(concepts, list) or not all(isinstance(c, dict) for c in concepts):
            problems.append(f"E_JUDGMENT: {where}: concepts must be a list of {{base, path, text}}")
            continue
        if verdict == "drop" and concepts:
            problems.append(f"E_JUDGMENT: {where}: drop must have no concepts")
        if verdict in ("promote", "merge") and not concepts:
            problems.append(f"E_JUDGMENT: {where}: {verdict} needs at least one concept")
        for concept in concepts:
            base = concept.get("base")
            stage = staging.get(base) if isinstance(base, str) else None
            if not isinstance(stage, Mapping) or stage.get("settled"):
                problems.append(f"E_JUDGMENT: {where}: base {base!r} is not a staged, unsettled base")
                continue
            path = concept.get("path")
            issue = _path_problem(path, owned_node_paths(stage), _limit(limits, base))
            if issue:
                problems.append(f"E_JUDGMENT: {where}: {issue}")
                continue
            body = concept.get("text")
            if not isinstance(body, str):
                problems.append(f"E_JUDGMENT: {where}: concept {path} has no text")
                continue
            if utf8_size(body) > MAX_CONCEPT_BYTES:
                problems.append(f"E_JUDGMENT: {where}: concept {path} is {utf8_size(body)} bytes; "
                                f"a concept is capped at {size_words(MAX_CONCEPT_BYTES)}")
                continue
            if CREDENTIAL_RE.search(body):
                problems.append(f"E_EXCLUSION: {where}: concept {path} carries credential-shaped text")
            if isinstance(input_id, str) and input_id not in body:
                problems.append(f"E_JUDGMENT: {where}: concept {path} does not cite input {input_id}")
            if verdict == "merge" and path not in baselines.get(base, {}) and (base, path) not in texts:
                problems.append(f"E_JUDGMENT: {where}: merge into {base}/{path}, which does not exist")
            previous = texts.setdefault((base, path), body)
            if previous != body:
                problems.append(f"E_JUDGMENT: {where}: {base}/{path} is given two different texts")
    for missing in [i for i in wanted if i not in seen]:
        problems.append(f"E_JUDGMENT: no outcome for input {missing}")
    claimed = {key for key in texts}
    for number, removal in enumerate(removals):
        base, path, reason = removal.get("base"), removal.get("path"), removal.get("reason")
        stage = staging.get(base) if isinstance(base, str) else None
        if not isinstance(stage, Mapping) or stage.get("settled"):
            problems.append(f"E_JUDGMENT: removal {number}: base {base!r} is not a staged, unsettled base")
            continue
        issue = _path_problem(path, owned_node_paths(stage), _limit(limits, base))
        if issue:
            problems.append(f"E_JUDGMENT: removal {number}: {issue}")
        elif path not in baselines.get(base, {}):
            problems.append(f"E_JUDGMENT: removal {number}: {base}/{path} does not exist")
        elif (base, path) in claimed:
            problems.append(f"E_JUDGMENT: removal {number}: {base}/{path} is also written by an outcome")
        if not isinstance(reason, str) or not reason.strip():
            problems.append(f"E_JUDGMENT: removal {number}: an explicit removal reason is required")
    if problems:
        return JudgmentCheck(judgment, tuple(problems))
    afters: dict[str, Tree] = {}
    for alias, stage in staging.items():
        if stage.get("settled") or alias not in baselines:
            continue
        after = apply_judgment(baselines[alias], alias, outcomes, removals, owned_node_paths(stage), at=at)
        problems.extend(f"E_JUDGMENT: {alias}/{issue}" for issue in write_problems(
            baselines[alias], after, _limit(limits, alias), roots.get(alias) if roots else None))
        for finding in validate_tree(after, strict=True):
            problems.append(f"E_VALIDATION: {alias}/{finding.path}: {finding.message}")
        afters[alias] = after
    return JudgmentCheck(judgment, tuple(problems), afters)


def _limit(limits: Mapping[str, PathLimits] | None, alias: object) -> PathLimits:
    found = limits.get(alias) if limits is not None and isinstance(alias, str) else None
    return found or PathLimits()


def write_problems(before: Mapping[str, bytes], after: Mapping[str, bytes], limits: PathLimits,
                   root: Path | None) -> list[str]:
    """Why the files changed between ``before`` and ``after`` cannot be written (limits, shape, disk)."""
    changed = changed_paths(before, after)
    problems = [p for p in (limits.problem(path) for path in changed) if p]
    problems.extend(shape_problems(before, after, changed))
    if root is not None and not problems:
        problems.extend(p for p in (disk_problem(root, path) for path in changed) if p)
    return problems
