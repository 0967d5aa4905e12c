"""Insight listeners: ``insights/<topic>`` preference documents and their ``Approved insights`` list.

A listener is an ordinary preference document under the narrowest durable owner (repo, profile or
user; never a node), delivered on boot at ``preview``. Its body holds the domain boundary, a
directive to follow ``[[insights/capture]]``, and an ``Approved insights`` section that gains one
``[[link]]`` per approved principle.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .errors import DocumentInvalidError, NameRefusedError

__all__ = [
    "LISTENER_RULES",
    "APPROVED_HEADING",
    "LISTENER_OWNER_TYPES",
    "topic_slug",
    "listener_path",
    "listener_preview",
    "listener_body",
    "append_approved_link",
]

LISTENER_RULES = ({"on": "boot", "deliver": "preview"},)
"""The delivery rule every listener carries."""
APPROVED_HEADING = "## Approved insights"
LISTENER_OWNER_TYPES = ("repo", "profile", "user")
_SLUG = re.compile(r"[^a-z0-9]+")


def topic_slug(topic: str) -> str:
    """A short path-safe slug for ``topic`` (``"Pricing & Market"`` -> ``pricing-market``)."""
    slug = _SLUG.sub("-", (topic or "").lower()).strip("-")[:60].strip("-")
    if not slug:
        raise NameRefusedError(f"the topic {topic!r} gives no usable name; use letters or digits")
    return slug


def listener_path(topic: str) -> str:
    """``insights/<slug>``."""
    return f"insights/{topic_slug(topic)}"


def listener_preview(domain: str) -> str:
    """The listener's preview, naming the actual domain trigger."""
    domain = " ".join((domain or "").split())
    if not domain:
        raise DocumentInvalidError("a listener needs its domain boundary")
    return (f"When user-supplied information, a correction, or a user response relates to {domain}, "
            "read this preference because recognizing the underlying principle preserves knowledge "
            "future decisions can use.")


def listener_body(topic: str, domain: str, exclusions: Sequence[str] = ()) -> str:
    """The short listener body: boundary, exclusions, the capture directive, the approved section."""
    lines = [f"# Insight listener: {topic}", "", "## Domain", "", " ".join(domain.split())]
    if exclusions:
        lines += ["", "Not in this domain:", ""] + [f"- {e.strip()}" for e in exclusions if e.strip()]
    lines += [
        "",
        "## When it applies",
        "",
        "Whenever a source episode may reveal a reusable principle in this domain, follow "
        "[[insights/capture]].",
        "",
        APPROVED_HEADING,
        "",
    ]
    return "\n".join(lines)


def append_approved_link(body: str, target: str) -> str:
    """``body`` with ``- [[target]]`` appended at the end of its ``Approved insights`` section.

    A link already listed leaves the body unchanged; a body without the section gains it.
    """
    link = f"[[{target}]]"
    lines = body.rstrip("\n").split("\n")
    try:
        start = next(i for i, line in enumerate(lines) if line.strip().lower() == APPROVED_HEADING.lower())
    except StopIteration:
        return "\n".join(lines + ["", APPROVED_HEADING, "", f"- {link}"]) + "\n"
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    if any(link in line for line in lines[start:end]):
        return body
    insert_at = end
    while insert_at > start + 1 and not lines[insert_at - 1].strip():
        insert_at -= 1
    new = lines[:insert_at] + ([""] if insert_at == start + 1 else []) + [f"- {link}"] + lines[insert_at:]
    if end < len(lines) and new[insert_at + (2 if insert_at == start + 1 else 1)].startswith("## "):
        new.insert(insert_at + (2 if insert_at == start + 1 else 1), "")
    return "\n".join(new) + "\n"
