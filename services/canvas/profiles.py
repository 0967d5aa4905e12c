"""Profiles: owner objects with a fixed id, a display name, a purview, and directory defaults.

A profile is an owner object of type ``profile`` (id ``profile:<handle>`` when it is made; the id
stays when the profile is renamed, the handle and display name change together, so ``[[name/x]]``
links and ``owner=`` listings follow it). Its **purview** lists project repos, each with the
profile's **delivery limit** for that project's documents: ``content``, ``preview``, ``name`` or
``none`` (the seed's dial: it caps what reaches a node's automatic boot and workspace-open context,
never what a deliberate read reaches). A project is keyed by its repo handle, or ``repo:<handle>``
when another owner shares that handle. A directory may pin a default profile; a directory under
it inherits it (nearest wins).
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath

from sqlalchemy import select
from sqlmodel import Session

from .errors import DocumentInvalidError, NameTakenError, ObjectNotFoundError
from .models import DocumentRow, ObjectRow, ProfileDefaultRow, ProfileRow
from .names import check_handle, split_owner_ref
from .objects import Tx, ensure_owner, full_name, get_row, live_owner, summary_of
from .rule_index import driver_rows
from .search import index_object
from .views import ProfileView

__all__ = ["PROFILE_LIMITS", "LIMIT_RANK", "purview_of", "profile_row", "create_profile", "set_project",
           "rename_profile", "set_default", "default_for", "profile_view", "limit_for", "limit_of", "resolve_profile"]

PROFILE_LIMITS = ("content", "preview", "name", "none")
"""A project's delivery limit, widest first."""
LIMIT_RANK = {"none": 0, "name": 1, "preview": 2, "content": 3}
"""How much each level delivers (a cap keeps the smaller of the rule's level and the limit)."""


def profile_row(session: Session, ref: str) -> ObjectRow:
    """The profile ``ref`` names: the one holding the handle now (``profile:<handle>`` or a bare
    handle), else the one whose id ``ref`` is; a name it was renamed away from no longer answers."""
    type_, handle = split_owner_ref(ref) if isinstance(ref, str) else (None, "")
    row = live_owner(session, "profile", handle) if type_ in (None, "profile") and handle else None
    if row is None and type_ == "profile":  # its id, which stays when it is renamed
        row = get_row(session, ref)
    if row is None or row.type != "profile":
        raise ObjectNotFoundError(f"no profile is named {ref!r}")
    return row


_PURVIEW = "SELECT purview FROM profiles WHERE object_id = ?"


def purview_of(session: Session, profile_id: str) -> list[tuple[str, str]]:
    """The profile's projects with their limits, in the order they were added."""
    found = driver_rows(session, _PURVIEW, [profile_id])
    return purview_from(found[0][0] if found else None)


def purview_from(raw: str | None) -> list[tuple[str, str]]:
    """A purview as stored (JSON, or None for a profile without one) as ``(project, limit)`` pairs."""
    return [(str(p["project"]), str(p["limit"])) for p in json.loads(raw or "[]")]


def _store(session: Session, profile_id: str, purview: list[tuple[str, str]]) -> None:
    text = json.dumps([{"project": p, "limit": lim} for p, lim in purview])
    row = session.execute(select(ProfileRow).where(ProfileRow.object_id == profile_id)).scalar_one_or_none()
    if row is None:
        session.add(ProfileRow(object_id=profile_id, purview=text))
    else:
        row.purview = text
    session.flush()


def _check_project(project: str, limit: str) -> str:
    if limit not in PROFILE_LIMITS:
        raise DocumentInvalidError(f"the delivery limit {limit!r} must be one of {', '.join(PROFILE_LIMITS)}")
    handle = project[len("repo:"):] if isinstance(project, str) and project.startswith("repo:") else project
    check_handle(handle, "project (repo handle)")
    return project


def create_profile(tx: Tx, handle: str, *, display_name: str | None = None,
                   purview: list[tuple[str, str]] | None = None) -> ObjectRow:
    """A new profile ``profile:<handle>``; refused when a live profile already holds that name."""
    check_handle(handle, "profile name")
    if live_owner(tx.session, "profile", handle) is not None:
        raise NameTakenError(f"a profile named {handle!r} already exists")
    projects = [(_check_project(p, lim), lim) for p, lim in (purview or [])]
    row = ensure_owner(tx, "profile", handle, name=display_name or handle)
    _store(tx.session, row.id, projects)
    tx.change("profile.changed", row.id, name=row.name)
    return row


def set_project(tx: Tx, profile: ObjectRow, project: str, limit: str | None) -> list[tuple[str, str]]:
    """Add or change a project of the purview (``limit=None`` removes it); the new purview."""
    purview = purview_of(tx.session, profile.id)
    if limit is None:
        purview = [(p, lim) for p, lim in purview if p != project]
    else:
        _check_project(project, limit)
        purview = [(p, limit if p == project else lim) for p, lim in purview]
        if project not in {p for p, _ in purview}:
            purview.append((project, limit))
    _store(tx.session, profile.id, purview)
    tx.change("profile.changed", profile.id, project=project, limit=limit)
    return purview


def rename_profile(tx: Tx, profile: ObjectRow, new_handle: str, *, display_name: str | None = None) -> ObjectRow:
    """Change the handle (and display name) together; the id stays. Refused when another live
    profile holds ``new_handle``. The profile's documents are re-indexed under their new full names."""
    check_handle(new_handle, "profile name")
    clash = tx.session.execute(select(ObjectRow.id).where(
        ObjectRow.type == "profile", ObjectRow.handle == new_handle, ObjectRow.id != profile.id)).first()
    if clash is not None:
        raise NameTakenError(f"cannot rename the profile {profile.handle!r} to {new_handle!r}: "
                             f"another profile ({clash[0]}) holds that name")
    old = profile.handle
    profile.handle, profile.name, profile.updated_at = new_handle, display_name or new_handle, tx.now
    tx.session.flush()
    docs = tx.session.execute(select(ObjectRow, DocumentRow.preview, DocumentRow.body).join(
        DocumentRow, DocumentRow.object_id == ObjectRow.id).where(ObjectRow.owner_id == profile.id)).all()
    for doc, preview, body in docs:
        index_object(tx.session, doc.pk or 0, full_name(tx.session, doc), preview, body)
    tx.change("profile.renamed", profile.id, previous=old, name=new_handle)
    return profile


def _directory(path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise DocumentInvalidError(f"the directory {path!r} must be an absolute path")
    return str(PurePosixPath(path))


def set_default(tx: Tx, directory: str, profile: ObjectRow | None) -> None:
    """Pin (or, with ``None``, unpin) the default profile of ``directory`` and what is under it."""
    key = _directory(directory)
    row = tx.session.get(ProfileDefaultRow, key)
    if profile is None:
        if row is not None:
            tx.session.delete(row)
    elif row is None:
        tx.session.add(ProfileDefaultRow(directory=key, profile_id=profile.id))
    else:
        row.profile_id = profile.id
    tx.session.flush()
    tx.change("profile.default", profile.id if profile else "", directory=key)


def default_for(session: Session, directory: str) -> ObjectRow | None:
    """The profile pinned on ``directory`` or its nearest parent; None when none is."""
    path = PurePosixPath(_directory(directory))
    candidates = [str(path)] + [str(p) for p in path.parents]
    rows = {r.directory: r.profile_id for r in session.execute(
        select(ProfileDefaultRow).where(ProfileDefaultRow.directory.in_(candidates))).scalars()}
    for candidate in candidates:
        if candidate in rows:
            return get_row(session, rows[candidate])
    return None


def limit_for(purview: list[tuple[str, str]], owner: ObjectRow) -> tuple[str, str] | None:
    """The ``(project key, limit)`` of the purview that caps documents of ``owner`` (a repo by its
    handle or ``repo:<handle>``; another owner only by ``<type>:<handle>``), or None."""
    return limit_of(purview, owner.type, owner.handle or owner.id)


def limit_of(purview: list[tuple[str, str]], type_: str, handle: str) -> tuple[str, str] | None:
    """``limit_for`` an owner of type ``type_`` known by ``handle`` (its id when it has no handle)."""
    keys = [f"{type_}:{handle}"] + ([handle] if type_ == "repo" else [])
    for key in keys:
        for project, limit in purview:
            if project == key:
                return project, limit
    return None


def profile_view(session: Session, profile: ObjectRow) -> ProfileView:
    """The profile as a read model: id, handle, display name, purview and pinned directories."""
    dirs = session.execute(select(ProfileDefaultRow.directory).where(ProfileDefaultRow.profile_id == profile.id)
                           .order_by(ProfileDefaultRow.directory)).scalars().all()
    return ProfileView(object=summary_of(profile, None), handle=profile.handle or profile.id, display_name=profile.name,
                       purview=tuple(purview_of(session, profile.id)), defaults=tuple(dirs))


def resolve_profile(session: Session, ref: str | None) -> str | None:
    """A node's profile reference as the profile's id when one answers to it (id, ``profile:x``,
    handle), else the reference as given."""
    if not ref:
        return None
    try:
        return profile_row(session, ref).id
    except ObjectNotFoundError:
        return ref
