"""The insight proposal: the capture template's fields, parsed from its markdown or given directly.

The template (``insights/capture``)::

    # Proposed insight: <short principle name>

    - **destination:** <canonical name (owner) — ...>
    - **visibility:** <the delivery rules the document will carry, or none, and why>
    - **source:** <the episode in one line, quoting the user's pivotal words>

    ## Proposed durable truth

    - <Terse truth ...>
    - <Another plausible formulation only when the deeper principle is uncertain.>
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import ServiceError

__all__ = ["ProposalError", "Proposal", "parse_proposal", "rules_for_visibility"]


class ProposalError(ServiceError):
    """A proposal that does not follow the template (missing field, no candidate truth)."""


@dataclass(frozen=True)
class Proposal:
    """What the operator reviews: one principle, where it goes, who sees it, where it came from."""

    title: str
    owner: str
    """The destination owner reference (``user:ada``, ``repo:garden``, ``profile:work``)."""
    name: str
    """The destination document path under that owner (``principles/short-answers``)."""
    listener: str | None
    """The listener (``<owner-handle>/insights/<topic>``) whose ``Approved insights`` gains the link."""
    visibility: str
    source: str
    candidates: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.title.strip():
            raise ProposalError("a proposal needs a short principle name")
        if not self.owner.strip() or not self.name.strip():
            raise ProposalError("a proposal needs a destination: an owner and a document name")
        if not self.source.strip():
            raise ProposalError("a proposal needs its source episode")
        if not [c for c in self.candidates if c.strip()]:
            raise ProposalError("a proposal needs at least one candidate durable truth")


_TITLE = re.compile(r"^#\s*Proposed insight:\s*(?P<title>.+?)\s*$", re.M)
_FIELD = re.compile(r"^-\s*\*\*(?P<key>destination|visibility|source):\*\*\s*(?P<value>.+?)\s*$", re.M | re.I)
_DESTINATION = re.compile(r"^(?P<name>[^\s(]+)\s*\((?P<owner>[a-z]+:[^)\s]+)\)(?:.*?\[\[(?P<listener>[^\]]+)\]\])?")


def parse_proposal(markdown: str) -> Proposal:
    """A proposal from the template's markdown; ``destination`` reads ``<name> (<owner>) ... [[listener]]``."""
    title = _TITLE.search(markdown)
    if title is None:
        raise ProposalError("the proposal has no '# Proposed insight: <name>' heading")
    fields = {m.group("key").lower(): m.group("value") for m in _FIELD.finditer(markdown)}
    missing = [k for k in ("destination", "visibility", "source") if k not in fields]
    if missing:
        raise ProposalError(f"the proposal is missing {', '.join(missing)}")
    destination = _DESTINATION.match(fields["destination"])
    if destination is None:
        raise ProposalError("destination must read '<document name> (<owner type>:<handle>) ...'")
    _, _, truths = markdown.partition("## Proposed durable truth")
    candidates = tuple(
        line[1:].strip() for line in truths.splitlines() if line.strip().startswith("-") and line[1:].strip()
    )
    return Proposal(
        title=title.group("title"),
        owner=destination.group("owner"),
        name=destination.group("name"),
        listener=destination.group("listener"),
        visibility=fields["visibility"],
        source=fields["source"],
        candidates=candidates,
    )


def rules_for_visibility(visibility: str) -> list[dict[str, str]]:
    """The delivery rules a visibility line asks for: a boot rule only when it says so, else none."""
    text = visibility.strip().lower()
    if text.startswith("boot"):
        deliver = "body" if "body" in text else "preview"
        return [{"on": "boot", "deliver": deliver}]
    return []
