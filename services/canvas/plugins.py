"""Installed plugins, as the seed has them: an installed plugin is an app (``app:<plugin>``), its
shipped documents public, and it is installed at a **scope**, the person's (user scope) or a
project's (a repo). A node's reader view lists the plugins installed for its repos (nearest first)
and for its person, so their documents resolve and load after the person and before ``crtr``.

An installation is an ``installed`` edge from the scope's owner object to the plugin's app, in
install order: it lives in the object graph (``Canvas.edges`` shows it) and goes with either end.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete
from sqlmodel import Session

from .errors import DocumentInvalidError
from .edges import add_edge
from .models import EdgeRow, ObjectRow
from .names import CRTR_APP, check_handle, owner_id
from .objects import Tx, ensure_owner
from .rule_index import driver_rows, one_of

__all__ = ["PLUGIN_SCOPES", "INSTALLED", "install_plugin", "uninstall_plugin", "plugins_of", "installed_for"]

PLUGIN_SCOPES = ("user", "repo")
"""The owners a plugin is installed for: the person (user scope) or a project (a repo)."""
INSTALLED = "installed"
"""The edge kind from a scope's owner to a plugin's app."""


def _check(plugin: str, scope: ObjectRow) -> str:
    check_handle(plugin, "plugin name")
    if owner_id("app", plugin) == CRTR_APP:
        raise DocumentInvalidError("crtr is built in, not a plugin: it is in every reader's view already")
    if scope.type not in PLUGIN_SCOPES:
        raise DocumentInvalidError(f"a plugin is installed for a person (user:<handle>) or a project "
                                   f"(repo:<handle>), not for a {scope.type}")
    return plugin


def install_plugin(tx: Tx, plugin: str, scope: ObjectRow) -> list[str]:
    """Install ``plugin`` (its app, created if missing) for ``scope``; returns the scope's plugins."""
    app = ensure_owner(tx, "app", _check(plugin, scope))
    before = installed_for(tx.session, [scope.id])
    add_edge(tx.session, scope.id, app.id, INSTALLED, tx.now)
    if plugin not in before:
        tx.change("plugin.installed", app.id, scope=scope.id, plugin=plugin)
    return installed_for(tx.session, [scope.id])


def uninstall_plugin(tx: Tx, plugin: str, scope: ObjectRow) -> bool:
    """Remove ``plugin`` from ``scope``; whether it was installed there (its app and documents stay)."""
    gone = tx.session.execute(delete(EdgeRow).where(
        EdgeRow.src_id == scope.id, EdgeRow.kind == INSTALLED,
        EdgeRow.dst_id == owner_id("app", _check(plugin, scope)))).rowcount
    if gone:
        tx.change("plugin.uninstalled", owner_id("app", plugin), scope=scope.id, plugin=plugin)
    return bool(gone)


def installed_for(session: Session, scopes: Sequence[str]) -> list[str]:
    """The plugins installed for the owners ``scopes`` (ids), scope by scope in that order, each in
    install order, each plugin once."""
    if not scopes:
        return []
    where, params = one_of(session, "e.src_id", list(scopes))
    rows = driver_rows(session, f"SELECT e.src_id, o.handle FROM edges e JOIN objects o ON o.id = e.dst_id "
                                f"WHERE e.kind = '{INSTALLED}' AND {where} ORDER BY e.id", params)
    rank = {scope: i for i, scope in enumerate(scopes)}
    ordered = sorted(((rank[src], i, handle) for i, (src, handle) in enumerate(rows) if handle), key=lambda r: r[:2])
    return list(dict.fromkeys(str(handle) for _, _, handle in ordered))


def plugins_of(session: Session, repos: Sequence[str], person: str | None) -> tuple[str, ...]:
    """A reader's plugins: those installed for its repos (handles, nearest first), then its person's."""
    scopes = [owner_id("repo", r) for r in repos] + ([owner_id("user", person)] if person else [])
    return tuple(installed_for(session, scopes))


