"""Who may read an object: the one place the canvas decides it (owner and privacy, seen by a reader).

A reader is a ``ReaderView`` (node, repos nearest first, profile, app, person, plugins). The
operator's own view is no reader at all (``None``): it sees everything, and read models say so
(``seen_as``). For a reader, an object it may not read is **absent**: a read of it answers
``ObjectNotFoundError`` with the same words as a name nobody holds, a listing skips it, a search
never ranks it, an edge to it is not drawn and an inbox entry about it is not listed.

The rule (``Access.allows``), for an object with owner ``O`` and privacy ``P``:

- ``public``: every reader.
- ``friends``: a reader whose **friends** include ``O``. A reader's friends are every owner in its
  view (its own node, its repos, its profile, its app, its person, its plugins and ``crtr``) plus
  the nodes next to its node in the spawn tree (the node that spawned it and the nodes it
  spawned). The seed leaves ``friends`` open; this is the choice: the owners a reader already
  works under, and its immediate collaborators, never a stranger.
- ``private``: a reader that **is** ``O``: its own node, its profile, its app or its person (not a
  repo, which owns only public documents, nor a plugin or ``crtr``, which ship public documents).

An object is also always visible to a reader that is that object (a node sees itself, its profile
object, its person object). Owner objects themselves (people, apps, repos, profiles) have no owner
and are public.

The same rule is written twice, as a Python test and as SQL, so listing and search filter inside
the database; ``tests/services/canvas/test_eligibility.py`` checks they agree on every row of its table.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlalchemy import ColumnElement, and_, or_
from sqlmodel import Session, col

from .models import ObjectRow
from .names import ReaderView
from .rule_index import driver_rows

__all__ = ["Access", "access_for", "describe", "view_of_owner", "OPERATOR"]

OPERATOR = "operator (no reader: sees everything)"
"""What ``seen_as`` says for the operator's own view."""


@dataclass(frozen=True, slots=True)
class Access:
    """A reader's resolved access: the owners it is (``own``) and its friends (``friends`` ⊇ ``own``)."""

    own: frozenset[str]
    friends: frozenset[str]
    label: str

    def allows(self, object_id: str, owner_id: str | None, privacy: str) -> bool:
        """Whether this reader may read an object with that id, owner and privacy."""
        if object_id in self.own or privacy == "public" or owner_id is None:
            return True
        if privacy == "friends":
            return owner_id in self.friends
        return owner_id in self.own

    def clause(self) -> ColumnElement[bool]:
        """The same rule as a SQL condition on ``objects``."""
        privacy, owner, id_ = col(ObjectRow.privacy), col(ObjectRow.owner_id), col(ObjectRow.id)
        return or_(privacy == "public", owner.is_(None), id_.in_(sorted(self.own)),
                   and_(privacy == "friends", owner.in_(sorted(self.friends))),
                   and_(privacy == "private", owner.in_(sorted(self.own))))

    def sql(self, alias: str) -> tuple[str, dict[str, str]]:
        """The rule as a text condition on the objects row ``alias`` with its parameters (for raw SQL);
        the lists are inlined as numbered parameters so no expanding parameter is needed."""
        params: dict[str, str] = {}

        def listed(prefix: str, values: frozenset[str]) -> str:
            names = []
            for i, value in enumerate(sorted(values)):
                params[f"{prefix}{i}"] = value
                names.append(f":{prefix}{i}")
            return "(" + ", ".join(names) + ")" if names else "(NULL)"
        own, friends = listed("acc_own", self.own), listed("acc_fr", self.friends)
        return (f"({alias}.privacy = 'public' OR {alias}.owner_id IS NULL OR {alias}.id IN {own} "
                f"OR ({alias}.privacy = 'friends' AND {alias}.owner_id IN {friends}) "
                f"OR ({alias}.privacy = 'private' AND {alias}.owner_id IN {own}))"), params


def view_of_owner(owner: ObjectRow | None) -> ReaderView:
    """The reader's view a document's links resolve in: its owner's own position."""
    if owner is None:
        return ReaderView()
    handle = owner.handle or owner.id
    return {
        "node": ReaderView(node=owner.id),
        "repo": ReaderView(repos=(handle,)),
        "profile": ReaderView(profile=handle),
        "app": ReaderView(app=handle),
        "user": ReaderView(person=handle),
    }.get(owner.type, ReaderView(node=owner.id))


def describe(view: ReaderView | None) -> str:
    """How a read model names who it was seen as."""
    if view is None:
        return OPERATOR
    parts = [f"node {view.node}" if view.node else None,
             f"repos {', '.join(view.repos)}" if view.repos else None,
             f"profile {view.profile}" if view.profile else None,
             f"app {view.app}" if view.app else None,
             f"person {view.person}" if view.person else None,
             f"plugins {', '.join(view.plugins)}" if view.plugins else None]
    return "reader " + " · ".join(p for p in parts if p) if any(parts) else "reader with an empty view"


_SPAWN_NEIGHBOURS = ("SELECT id FROM (SELECT dst_id AS id FROM edges WHERE src_id = ? AND kind = 'spawned' LIMIT 1000) "
                     "AS children UNION ALL SELECT id FROM (SELECT src_id AS id FROM edges WHERE dst_id = ? "
                     "AND kind = 'spawned' LIMIT 10) AS parents")
"""The nodes next to a reader's node in the spawn tree, its children and its parents, in one statement
read straight from the driver (see ``access_for``)."""


_PROFILE_BY_HANDLE = ("SELECT id, handle FROM objects WHERE type = 'profile' AND (handle = ? OR id = ?) "
                      "ORDER BY pk LIMIT 2")


def settle_view(session: Session, view: ReaderView) -> ReaderView:
    """``view`` with a profile given by handle replaced by the id of the profile holding that handle
    now: a profile keeps its id (``profile:<old handle>``) when renamed, so ``profile:<handle>`` is
    not who holds a name. A handle nobody holds any more names no profile."""
    if not view.profile or view.profile.startswith("profile:"):
        return view
    rows = driver_rows(session, _PROFILE_BY_HANDLE, [view.profile, f"profile:{view.profile}"])
    holder = next((id_ for id_, handle in rows if handle == view.profile), None)
    if holder is None and not rows:
        return view
    return replace(view, profile=holder)


def access_for(session: Session, view: ReaderView | None) -> Access | None:
    """The reader's access (``None`` for the operator's view, which sees everything)."""
    if view is None:
        return None
    label, view = describe(view), settle_view(session, view)
    order = view.owner_ids()
    own = {i for i in (view.node, view.profile_id(), view.app and f"app:{view.app}",
                       view.person and f"user:{view.person}") if i}
    friends = set(order) | own
    if view.node:
        friends.update(id_ for id_, in driver_rows(session, _SPAWN_NEIGHBOURS, [view.node, view.node]))
    return Access(own=frozenset(own), friends=frozenset(friends), label=label)
