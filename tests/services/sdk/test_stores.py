"""Connection stores: the memory store, the SQLModel store on a real SQLite file, and their locks."""

from __future__ import annotations

import asyncio

import pytest

from services.sdk import Connection, ConnectionStore, MemoryConnectionStore, SQLModelConnectionStore


def conn(user_id: str = "user:o1", refresh: str = "rt_1") -> Connection:
    return Connection(
        user_id=user_id,
        access_token="at_1",
        refresh_token=refresh,
        expires_at=1_800_000_100.5,
        scope=["crtr:llm", "sms:send"],
        runtime_url="https://runtime.test",
        runtime_id="runtime:test",
    )


@pytest.fixture(params=["memory", "sqlite-file", "sqlite-memory"])
def any_store(request, tmp_path):
    if request.param == "memory":
        yield MemoryConnectionStore()
        return
    url = f"sqlite:///{tmp_path / 'c.db'}" if request.param == "sqlite-file" else "sqlite://"
    store = SQLModelConnectionStore(url)
    yield store
    store.close()


async def test_save_get_replace_delete(any_store) -> None:
    assert isinstance(any_store, ConnectionStore)
    assert await any_store.get("user:o1") is None
    await any_store.save(conn())
    assert await any_store.get("user:o1") == conn()
    await any_store.save(conn(refresh="rt_2"))
    await any_store.save(conn("user:o2"))
    assert (await any_store.get("user:o1")).refresh_token == "rt_2"
    await any_store.delete("user:o1")
    await any_store.delete("user:o1")
    assert await any_store.get("user:o1") is None
    assert await any_store.get("user:o2") == conn("user:o2")


async def test_a_returned_connection_is_a_copy(any_store) -> None:
    await any_store.save(conn())
    got = await any_store.get("user:o1")
    got.scope.append("x")
    got.refresh_token = "changed"
    assert await any_store.get("user:o1") == conn()


async def test_the_sqlite_store_survives_reopening(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    first = SQLModelConnectionStore(url)
    await first.save(conn())
    first.close()
    again = SQLModelConnectionStore(url)
    assert await again.get("user:o1") == conn()
    again.close()


async def test_the_lock_excludes_other_tasks(any_store) -> None:
    order: list[str] = []

    async def holder(name: str) -> None:
        async with any_store.lock("user:o1"):
            order.append(f"{name}+")
            await asyncio.sleep(0.01)
            order.append(f"{name}-")

    await asyncio.gather(holder("a"), holder("b"))
    assert order in (["a+", "a-", "b+", "b-"], ["b+", "b-", "a+", "a-"])


async def test_the_file_lock_excludes_another_store_on_the_same_file(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    first, second = SQLModelConnectionStore(url), SQLModelConnectionStore(url)
    assert first.lock_path == tmp_path / "c.db.lock"
    entered = asyncio.Event()
    release = asyncio.Event()

    async def hold() -> None:
        async with first.lock("user:o1"):
            entered.set()
            await release.wait()

    got_it = asyncio.Event()

    async def wait_for_it() -> None:
        async with second.lock("user:o2"):
            got_it.set()

    holder = asyncio.ensure_future(hold())
    await entered.wait()
    waiter = asyncio.ensure_future(wait_for_it())
    await asyncio.sleep(0.05)
    assert not got_it.is_set()  # held by the other store, though for another person
    release.set()
    await holder
    await asyncio.wait_for(waiter, 5)
    assert got_it.is_set()
    first.close()
    second.close()
