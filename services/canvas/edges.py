"""Edges between canvas objects, written without anything else (events, watches) attached.

``add_edge`` is used by every writer of an edge, from the lowest modules (plugins, documents) to
events, so it stands below all of them: a module that only adds an edge needs nothing of events.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session

from .models import EdgeRow

__all__ = ["add_edge"]


def add_edge(session: Session, src_id: str, dst_id: str, kind: str, at: float) -> None:
    """Add ``src --kind--> dst`` unless it exists."""
    if session.get_bind().dialect.name == "sqlite":
        stmt = sqlite_insert(EdgeRow).values(src_id=src_id, dst_id=dst_id, kind=kind, created_at=at)
        session.execute(stmt.on_conflict_do_nothing())
        return
    exists = session.execute(
        select(EdgeRow.id).where(EdgeRow.src_id == src_id, EdgeRow.dst_id == dst_id, EdgeRow.kind == kind)
    ).first()
    if exists is None:
        session.add(EdgeRow(src_id=src_id, dst_id=dst_id, kind=kind, created_at=at))
        session.flush()
