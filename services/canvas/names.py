"""Vocabularies, name rules, ``[[link]]`` parsing and the reader's view used to resolve bare names.

A document's full name is ``<owner-handle>/<path>``. Owner objects (``user``, ``app``, ``repo``,
``profile``) have ids ``<type>:<handle>`` (``app:crtr``, ``user:o1``); a node's handle is its id.
An owner reference in a full name is either a bare handle or ``<type>:<handle>`` when two owners
share a handle (``node:<id>`` for a node sharing its id with another owner's handle). A bare name
resolves in the reader's view: own node, repos nearest-first, profile, app, the person, installed
plugins, and ``crtr`` last.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import NameRefusedError

__all__ = [
    "OWNER_TYPES",
    "RESOLVE_TYPES",
    "OBJECT_TYPES",
    "PRIVACY_LEVELS",
    "DOCUMENT_KINDS",
    "BUILTIN_NODE_KINDS",
    "NODE_MODES",
    "NODE_LIFECYCLES",
    "NODE_STATUSES",
    "CRTR_APP",
    "ReaderView",
    "owner_id",
    "check_path",
    "check_handle",
    "check_node_kind",
    "split_owner_ref",
    "link_targets",
]

OWNER_TYPES = ("user", "app", "repo", "profile")
"""Owner objects other than nodes (a node owns what it writes by default)."""
RESOLVE_TYPES = ("node", "repo", "profile", "app", "user")
"""Every type whose objects own documents and hold a handle; ``<type>:<handle>`` names one of them."""
OBJECT_TYPES = ("document", "node", "job", "custom", *OWNER_TYPES)
PRIVACY_LEVELS = ("public", "friends", "private")
DOCUMENT_KINDS = ("knowledge", "preference", "report")
BUILTIN_NODE_KINDS = ("general", "explore", "advisor", "spec", "design", "plan", "developer", "review")
NODE_MODES = ("base", "orchestrator")
NODE_LIFECYCLES = ("terminal", "resident")
NODE_STATUSES = ("active", "idle", "waiting_on_user", "done", "dead", "canceled")
CRTR_APP = "app:crtr"
"""crtr's own documents belong to this app; it is always last in a reader's view."""

_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@+-]*$")
_KIND = re.compile(r"^[a-z][a-z0-9-]*(/[a-z][a-z0-9-]*)*$")
_LINK = re.compile(r"\[\[([^\[\]\n|]+?)(?:\|[^\[\]\n]*)?\]\]")
MAX_NAME = 400


def owner_id(type_: str, handle: str) -> str:
    """The object id of an owner of ``type_`` with ``handle`` (``user:o1``, ``repo:workbench``)."""
    return f"{type_}:{handle}"


def check_handle(handle: str, what: str = "handle") -> str:
    """``handle`` if it is one safe segment; else ``NameRefusedError`` naming it."""
    if not isinstance(handle, str) or not _SEGMENT.match(handle) or len(handle) > 128:
        raise NameRefusedError(f"the {what} {handle!r} is not a valid handle (letters, digits, _ . @ + -)")
    return handle


def check_path(path: str) -> str:
    """``path`` if it stays inside its owner's namespace: relative, no empty, ``.`` or ``..`` part."""
    if not isinstance(path, str) or not path:
        raise NameRefusedError("a document name is required")
    if len(path) > MAX_NAME:
        raise NameRefusedError(f"the name {path[:60]!r}… is longer than {MAX_NAME} characters")
    if path.startswith("/") or "\\" in path or "\x00" in path:
        raise NameRefusedError(f"the name {path!r} escapes its owner's namespace (absolute or not a plain path)")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise NameRefusedError(f"the name {path!r} escapes its owner's namespace (empty, '.' or '..' part)")
        if not _SEGMENT.match(part):
            raise NameRefusedError(f"the name {path!r} has an invalid part {part!r} (letters, digits, _ . @ + -)")
    return path


def check_node_kind(kind: str) -> str:
    """A builtin kind, a custom persona slug, or a sub-kind path (``review/security``)."""
    if not isinstance(kind, str) or not _KIND.match(kind):
        raise NameRefusedError(f"the node kind {kind!r} is not a valid kind name")
    return kind


def split_owner_ref(ref: str) -> tuple[str | None, str]:
    """``"repo:x"`` -> ``("repo", "x")`` (``node:<id>`` too); a bare handle -> ``(None, handle)``."""
    if ":" in ref:
        type_, _, handle = ref.partition(":")
        if type_ in RESOLVE_TYPES:
            return type_, handle
    return None, ref


def link_targets(body: str) -> list[str]:
    """The distinct ``[[target]]`` texts of ``body`` in order (``[[a|label]]`` counts as ``a``)."""
    seen: dict[str, None] = {}
    for match in _LINK.finditer(body or ""):
        seen.setdefault(match.group(1).strip(), None)
    return [t for t in seen if t]


@dataclass(frozen=True, slots=True)
class ReaderView:
    """Who is reading: decides where a bare name resolves, in the seed's order."""

    node: str | None = None
    repos: tuple[str, ...] = ()
    """Repo handles, nearest first."""
    profile: str | None = None
    """A profile handle, or its object id ``profile:<id>`` (which stays when the profile is renamed)."""
    app: str | None = None
    person: str | None = None
    plugins: tuple[str, ...] = ()

    def profile_id(self) -> str | None:
        """The profile's object id (``profile:<handle>`` for a bare handle)."""
        if not self.profile:
            return None
        return self.profile if self.profile.startswith("profile:") else owner_id("profile", self.profile)

    def owner_ids(self) -> list[str]:
        """Owner object ids to try, first match wins."""
        order: list[str] = []
        if self.node:
            order.append(self.node)
        order += [owner_id("repo", r) for r in self.repos]
        if self.profile:
            order.append(self.profile_id() or "")
        if self.app:
            order.append(owner_id("app", self.app))
        if self.person:
            order.append(owner_id("user", self.person))
        order += [owner_id("app", p) for p in self.plugins]
        order.append(CRTR_APP)
        return list(dict.fromkeys(order))
