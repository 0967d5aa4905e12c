"""The engine: per-connection pragmas, foreign keys, BEGIN IMMEDIATE for writers, and the query plans."""

from __future__ import annotations

import re
import sqlite3
import threading

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import IntegrityError, OperationalError

from services.canvas import Canvas, make_engine
from services.canvas.engine import create_schema, read_session, write_session

from .conftest import PREVIEW


def test_every_pooled_connection_gets_the_pragmas(tmp_path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'c.db'}")
    create_schema(engine)
    conns = [engine.connect() for _ in range(5)]
    try:
        for conn in conns:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 5000
    finally:
        for conn in conns:
            conn.close()
    with pytest.raises(IntegrityError):
        with write_session(engine) as session:
            session.execute(text("INSERT INTO edges(src_id, dst_id, kind, created_at) VALUES ('nope', 'nada', 'watches', 0)"))
    engine.dispose()


def test_writers_begin_immediate_and_readers_plain_begin(tmp_path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'c.db'}")
    create_schema(engine)
    begins: list[str] = []
    event.listen(engine, "before_cursor_execute",
                 lambda conn, cur, st, params, ctx, many: begins.append(st) if st.startswith("BEGIN") else None)
    with read_session(engine) as session:
        session.execute(text("SELECT count(*) FROM objects")).scalar()
    with write_session(engine) as session:
        session.execute(text("SELECT count(*) FROM objects")).scalar()
    assert begins == ["BEGIN", "BEGIN IMMEDIATE"]
    engine.dispose()


def test_read_then_write_threads_never_hit_database_is_locked(tmp_path) -> None:
    """8 threads read first, then write: with BEGIN IMMEDIATE + busy_timeout none fails."""
    engine = make_engine(f"sqlite:///{tmp_path / 'c.db'}")
    create_schema(engine)
    with write_session(engine) as session:
        session.execute(text("CREATE TABLE counter(n INTEGER)"))
        session.execute(text("INSERT INTO counter VALUES (0)"))
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(25):
                with write_session(engine) as session:
                    n = session.execute(text("SELECT n FROM counter")).scalar_one()
                    session.execute(text("UPDATE counter SET n = :n"), {"n": n + 1})
        except BaseException as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with read_session(engine) as session:
        assert session.execute(text("SELECT n FROM counter")).scalar_one() == 200  # no lost update
    engine.dispose()


def test_a_deferred_read_then_write_would_fail_which_the_hook_prevents(tmp_path) -> None:
    """Guard: the raw driver's deferred upgrade fails at once; our write_session waits instead."""
    path = tmp_path / "c.db"
    engine = make_engine(f"sqlite:///{path}")
    create_schema(engine)
    a = sqlite3.connect(path, timeout=2, isolation_level=None)
    b = sqlite3.connect(path, timeout=2, isolation_level=None)
    a.execute("BEGIN")
    a.execute("SELECT count(*) FROM objects").fetchone()
    b.execute("BEGIN IMMEDIATE")
    b.execute("INSERT INTO objects(id, type, kind, name, privacy, status, created_at, updated_at) "
              "VALUES ('user:x', 'user', '', 'x', 'public', '', 0, 0)")
    b.execute("COMMIT")
    with pytest.raises(sqlite3.OperationalError):
        a.execute("INSERT INTO objects(id, type, kind, name, privacy, status, created_at, updated_at) "
                  "VALUES ('user:y', 'user', '', 'y', 'public', '', 0, 0)")
    a.execute("ROLLBACK")
    a.close()
    b.close()
    engine.dispose()


def _plans(canvas: Canvas, captured: list[tuple[str, object]]) -> list[tuple[str, list[str]]]:
    out = []
    with canvas.engine.connect() as conn:
        for statement, params in captured:
            if statement.lstrip().upper().startswith("SELECT"):
                rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all()
                out.append((statement, [r[3] for r in rows]))
    return out


async def test_query_plans_use_indexes_for_every_ui_query(sqlite_canvas: Canvas) -> None:
    canvas = sqlite_canvas
    await canvas.ensure_owner("user", "o1")
    await canvas.spawn_node(node_id="n1")
    await canvas.spawn_node(node_id="n2", parent="n1")
    await canvas.write("a", owner="user:o1", preview=PREVIEW, body="x [[a]]", actor="n1")
    await canvas.message_send("hello", to="n2", sender="n1")
    captured: list[tuple[str, object]] = []

    def grab(conn, cursor, statement, params, context, executemany) -> None:  # noqa: ANN001
        captured.append((statement, params))

    event.listen(canvas.engine, "before_cursor_execute", grab)
    await canvas.list_objects(type="document", owner="user:o1", name_filter="a")
    await canvas.list_objects(type="node")
    await canvas.count_objects(type="node", owner="user:o1")
    await canvas.edges("n1")
    await canvas.edges("o1/a")
    await canvas.inbox("n2")
    await canvas.search("testing")
    await canvas.read("o1/a")
    event.remove(canvas.engine, "before_cursor_execute", grab)
    plans = _plans(canvas, captured)
    assert len(plans) > 15
    for statement, plan in plans:
        for line in plan:
            subquery = re.fullmatch(r"SCAN (g\d+|\(subquery-\d+\))", line)  # a neighbourhood's group: an index search
            assert not (line.startswith("SCAN") and "VIRTUAL TABLE" not in line and not subquery), (statement, plan)
            if "FROM object_fts" not in statement:
                assert "TEMP B-TREE" not in line, (statement, plan)
    joined = " ".join(line for _, plan in plans for line in plan)
    for index in ("ix_edges_dst_kind_src", "ux_edges_src_kind_dst", "ix_inbox_owner_id", "ix_events_object_id",
                  "ix_watches_object", "SEARCH object_counts USING", "SEARCH inbox_counts USING"):
        assert index in joined, index


async def test_busy_writer_gets_a_clear_error_and_nothing_is_written(tmp_path, clock) -> None:
    path = tmp_path / "canvas.db"
    canvas = await Canvas.open(path, clock=clock, busy_timeout_ms=100)
    await canvas.ensure_owner("user", "o1")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    from services.canvas import CanvasBusyError
    with pytest.raises(CanvasBusyError, match="busy"):
        await canvas.write("a", owner="user:o1", preview=PREVIEW, body="b")
    holder.execute("ROLLBACK")
    holder.close()
    assert await canvas.count_objects(type="document") == 0
    await canvas.write("a", owner="user:o1", preview=PREVIEW, body="b")
    assert await canvas.count_objects(type="document") == 1
    await canvas.close()


def test_operational_errors_other_than_busy_pass_through(tmp_path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'c.db'}")
    with pytest.raises(OperationalError):
        with read_session(engine) as session:
            session.execute(text("SELECT * FROM no_such_table"))
    engine.dispose()
