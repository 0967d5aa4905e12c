"""The judge seam and OKF's deterministic judge.

A judge receives one prompt that carries ``input.json``, ``staging.json`` and the owned nodes'
current concepts (``concepts.json``), each as a block ``<<<name`` / one line of JSON / ``>>>``,
and replies with the text of ``judgment.json``. In the product the prompt goes to a run on the
cloud (``isolated=True``, ``cwd`` inside the run's folder); ``LocalJudgeClient`` runs the same
deterministic judge in-process, and ``FixedReplyJudgeClient`` replays a given reply.

The deterministic judge applies OKF's two-part promotion test by rule, in this order, and says
which rule decided in every reason:

1. ``secret``: credential-shaped text -> drop.
2. ``task-residue``: TODO/WIP markers, "this branch", "today", ... -> drop.
3. ``decision`` / ``rationale`` / ``rejected-alternative`` / ``limit`` -> promote into the owned
   node (``decisions/`` or ``lessons/``), or merge when that concept already exists.
4. ``code-description``: "this function", "returns a", ... -> drop (readable from the repository).
5. otherwise ``no-durable-judgment`` -> drop.

Each promote/merge concept carries its full after-text in ``text`` (the judge run cannot edit
staged files here, so the concept text travels in the judgment); the text cites the input hash
and, for records, the turn ids. A note's local Markdown links point into its home, not into the
base, so they are kept as plain text (``label (target)``) and the base stays valid.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from .judgment import CREDENTIAL_RE
from .shapes import InputDoc, InputItem, JudgmentDoc, Outcome, StagingEntry

__all__ = ["JudgeClient", "LocalJudgeClient", "FixedReplyJudgeClient", "build_prompt", "parse_prompt",
           "judge_documents", "deterministic_judge_reply", "classify"]

_BLOCK_RE = re.compile(r"^<<<([a-z.]+)\n(.*?)\n>>>$", re.MULTILINE | re.DOTALL)
_SECRET_WORDS = re.compile(r"(?i)\b(password|passwd|api[_-]?key|secret[_-]?key|access[_-]?token)\s*[:=]\s*\S+")
_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("task-residue", re.compile(r"(?im)^\s*(?:[-*]\s*)?(?:TODO|FIXME|WIP)\b|\b(?:this branch|this PR|this task|today|tomorrow|right now|currently working on)\b", re.I)),
    ("decision", re.compile(r"\b(decided|decision|we chose|chose|agreed to|we will use|adopted)\b", re.I)),
    ("rejected-alternative", re.compile(r"\b(instead of|rather than|rejected|ruled out|do not use|don't use)\b", re.I)),
    ("rationale", re.compile(r"\b(because|rationale|so that|the reason)\b", re.I)),
    ("limit", re.compile(r"\b(limit|at most|at least|cannot|can't|must not|never|fails when|breaks when|only works|workaround|timeout)\b", re.I)),
    ("code-description", re.compile(r"\b(this function|the function|this class|this module|this method|returns (?:a|an|the)|is defined in)\b", re.I)),
]
_REASONS = {
    "secret": "drop by rule 'secret': credential-shaped text never enters accepted knowledge",
    "task-residue": "drop by rule 'task-residue': task state belongs in STATE.md or log.md, a future instance would not act differently",
    "decision": "by rule 'decision': a decision and its rationale change what a future instance does and cannot be read from the repository",
    "rejected-alternative": "by rule 'rejected-alternative': a rejected alternative stops a future instance re-deriving it and is not in the repository",
    "rationale": "by rule 'rationale': the reason behind a choice changes what a future instance does and is not in the repository",
    "limit": "by rule 'limit': a discovered limit changes what a future instance does and is not readable from the repository",
    "code-description": "drop by rule 'code-description': a future instance can read this from the repository",
    "no-durable-judgment": "drop by rule 'no-durable-judgment': no decision, rationale, rejected alternative or limit, so a future instance would not act differently",
    "no-destination": "drop by rule 'no-destination': the source owns no node to write into",
}


@runtime_checkable
class JudgeClient(Protocol):
    """Whatever judges a prompt: a cloud run, or the local deterministic judge."""

    async def judge(self, prompt: str, *, cwd: str) -> str:
        """Judge ``prompt`` (working folder ``cwd``) and return the judgment JSON text."""
        ...


def build_prompt(input_doc: InputDoc, staging_doc: Mapping[str, StagingEntry], concepts: dict[str, dict[str, str]]) -> str:
    """The judge prompt: instructions, then ``input.json``, ``staging.json`` and ``concepts.json``."""
    blocks = "".join(f"<<<{name}\n{json.dumps(doc, ensure_ascii=False, separators=(',', ':'))}\n>>>\n"
                     for name, doc in (("input.json", input_doc), ("staging.json", staging_doc),
                                       ("concepts.json", concepts)))
    return ("You are the OKF harvest judge. For every input decide promote, merge or drop by OKF's "
            "two-part promotion test (would a future instance act differently, and could it not "
            "discover this by reading the repository?). Write concepts only inside owned nodes, "
            "cite the input hash in every concept, never copy credentials. Reply with judgment.json only.\n\n"
            + blocks)


def parse_prompt(prompt: str) -> tuple[InputDoc, dict[str, StagingEntry], dict[str, dict[str, str]]]:
    """The three documents of a judge prompt; ``ValueError`` when one is missing or not JSON."""
    found = {m.group(1): m.group(2) for m in _BLOCK_RE.finditer(prompt)}
    docs = []
    for name in ("input.json", "staging.json", "concepts.json"):
        if name not in found:
            raise ValueError(f"the prompt carries no {name}")
        docs.append(json.loads(found[name]))
    return docs[0], docs[1], docs[2]


def _input_text(item: InputItem) -> str:
    if item.get("kind") == "note":
        return str(item.get("text", ""))
    lines = []
    for turn in item.get("turns", []):
        for part in turn.get("text", []):
            lines.append(f"**{part.get('role')}** ({turn.get('id')}): {part.get('text')}")
    return "\n\n".join(lines)


def classify(text: str) -> tuple[str, str]:
    """``(rule, matched words)`` for an input's text, by the ordered rules above."""
    match = CREDENTIAL_RE.search(text) or _SECRET_WORDS.search(text)
    if match:
        return "secret", "credential-shaped text"
    for rule, pattern in _RULES:
        found = pattern.search(text)
        if found:
            return rule, found.group(0).strip()
    return "no-durable-judgment", ""


_LOCAL_LINK_RE = re.compile(r"(?<!!)\[([^\]\n]*)\]\((?![a-zA-Z][a-zA-Z0-9+.-]*:|#)([^)\s]+)\)")


def _unlink(body: str) -> str:
    """Local links of a note point into its home, not the base: keep them as text (``label (target)``)."""
    return _LOCAL_LINK_RE.sub(lambda m: f"{m.group(1)} ({m.group(2)})", body)


def _strip_frontmatter(text: str) -> tuple[dict[str, str], str]:
    if text.startswith("---\n"):
        end = text.find("\n---", 3)
        if end >= 0:
            fields = {}
            for line in text[4:end].split("\n"):
                if ":" in line:
                    key, value = line.split(":", 1)
                    fields[key.strip()] = value.strip().strip("\"'")
            return fields, text[end + 4:].lstrip("\n")
    return {}, text


def _clean(text: str, limit: int) -> str:
    text = re.sub(r"[\[\]()\n\r\t`*#|]+", " ", text)
    return re.sub(r"\s+", " ", text).strip()[:limit].strip()


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60].strip("-")
    return slug or "concept"


def _first_sentence(body: str) -> str:
    for line in body.split("\n"):
        line = line.strip()
        if line and not line.startswith("#"):
            return _clean(re.split(r"(?<=[.!?])\s", line)[0], 160)
    return ""


def judge_documents(input_doc: InputDoc, staging_doc: Mapping[str, StagingEntry],
                    concepts: dict[str, dict[str, str]]) -> JudgmentDoc:
    """The deterministic judgment for ``input.json`` and ``staging.json`` (a pure function)."""
    destination = None
    for ref in input_doc.get("owns", []):
        alias, node = ref.split("/", 1)
        stage = staging_doc.get(alias)
        if isinstance(stage, dict) and not stage.get("settled") and node in stage.get("owned", []):
            destination = (alias, stage["nodes"][node]["path"])
            break
    texts: dict[tuple[str, str], str] = {}
    outcomes: list[Outcome] = []
    for item in input_doc.get("inputs", []):
        text = _input_text(item)
        rule, words = classify(text)
        if rule in ("decision", "rejected-alternative", "rationale", "limit") and destination is None:
            rule = "no-destination"
        if rule not in ("decision", "rejected-alternative", "rationale", "limit"):
            outcomes.append({"input": item["id"], "verdict": "drop", "reason": _REASONS[rule], "concepts": []})
            continue
        alias, node_path = destination  # type: ignore[misc]
        fields, body = _strip_frontmatter(text)
        body = _unlink(body)
        if item.get("kind") == "note":
            name_title = item.get("name", "concept").rsplit("/", 1)[-1].removesuffix(".md").replace("-", " ").replace("_", " ")
            title = _clean(fields.get("title") or name_title, 80).title() or "Concept"
        else:
            title = _clean(" ".join(_first_sentence(body).split()[:8]), 80) or "Run record"
        section = "lessons" if rule == "limit" else "decisions"
        path = f"{node_path}/{section}/{_slug(title)}.md"
        citation = (f"* input `{item['id']}`" + (f" (note {item.get('name')})" if item.get("kind") == "note" else
                    f" (run {item.get('thread')}, turns {', '.join(t['id'] for t in item.get('turns', []))})"))
        existing = texts.get((alias, path), concepts.get(alias, {}).get(path))
        if existing is None:
            description = _first_sentence(body) or title
            after = (f"---\ntype: {'Lesson' if rule == 'limit' else 'Decision'}\ntitle: {title}\n"
                     f"description: {description}\n---\n# {title}\n\n{body.strip()}\n\n# Citations\n\n{citation}\n")
            verdict = "promote"
        else:
            after = existing.rstrip("\n") + f"\n\n## Update from input {item['id'][:12]}\n\n{body.strip()}\n\n{citation}\n"
            verdict = "merge"
        texts[(alias, path)] = after
        outcomes.append({"input": item["id"], "verdict": verdict,
                         "reason": f"{verdict} {_REASONS[rule]} (matched {words!r})",
                         "concepts": [{"base": alias, "path": path}]})
    for outcome in outcomes:
        for concept in outcome["concepts"]:
            concept["text"] = texts[(concept["base"], concept["path"])]
    return {"version": 1, "exclusionsReviewed": True, "outcomes": outcomes, "removals": []}


def deterministic_judge_reply(prompt: str) -> str:
    """Parse a judge prompt and return the deterministic ``judgment.json`` text (for the fake cloud)."""
    input_doc, staging_doc, concepts = parse_prompt(prompt)
    return json.dumps(judge_documents(input_doc, staging_doc, concepts), indent=2, ensure_ascii=False)


class LocalJudgeClient:
    """Judges in-process with the deterministic judge (production path when no cloud is wired)."""

    async def judge(self, prompt: str, *, cwd: str) -> str:
        """The deterministic judgment for ``prompt``, computed off the event loop."""
        return await asyncio.to_thread(deterministic_judge_reply, prompt)


class FixedReplyJudgeClient:
    """Replies with a given text (or the result of ``reply(prompt)``): replays and broken judges."""

    def __init__(self, reply: str | Callable[[str], str]) -> None:
        self._reply = reply
        self.prompts: list[tuple[str, str]] = []
        """Every ``(prompt, cwd)`` this client was asked to judge."""

    async def judge(self, prompt: str, *, cwd: str) -> str:
        """The fixed reply."""
        self.prompts.append((prompt, cwd))
        return self._reply(prompt) if callable(self._reply) else self._reply
