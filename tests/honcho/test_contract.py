"""One contract, driven over real HTTP against the served fake by the official ``honcho-ai`` SDK
and by the project's own ``HonchoClient``: workspaces, peers, sessions, messages (``created_at``
kept, NUL stripped), listing, peer search, conclusions, representations and clones."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, Protocol

import pytest
from honcho import Honcho

from services.honcho import FakeHonchoService
from services.knowledge.outbox import HonchoClient
from services.served.honcho import HonchoServer

SENT_AT = "2025-03-04T05:06:07.123000+00:00"


class Driver(Protocol):
    async def open_session(self, session_id: str, peers: list[str]) -> None: ...
    async def add(self, session_id: str, items: list[dict[str, Any]]) -> list[str]: ...
    async def messages(self, session_id: str) -> list[dict[str, Any]]: ...
    async def search(self, peer_id: str, query: str) -> list[str]: ...
    async def conclude(self, observer: str, observed: str, content: str) -> None: ...
    async def representation(self, peer_id: str) -> str: ...
    async def clone(self, session_id: str, message_id: str) -> str: ...


class SdkDriver:
    """The official SDK (its synchronous client, run off the loop the server answers on)."""

    def __init__(self, url: str, workspace: str, api_key: str = "test-key") -> None:
        self.honcho = Honcho(base_url=url, workspace_id=workspace, api_key=api_key, max_retries=0)

    async def open_session(self, session_id: str, peers: list[str]) -> None:
        def go() -> None:
            session = self.honcho.session(session_id)
            session.add_peers([self.honcho.peer(p) for p in peers])
        await asyncio.to_thread(go)

    async def add(self, session_id: str, items: list[dict[str, Any]]) -> list[str]:
        def go() -> list[str]:
            session = self.honcho.session(session_id)
            made = [self.honcho.peer(i["peer"]).message(i["content"], metadata=i.get("metadata"),
                                                        created_at=i.get("created_at")) for i in items]
            return [m.id for m in session.add_messages(made)]
        return await asyncio.to_thread(go)

    async def messages(self, session_id: str) -> list[dict[str, Any]]:
        def go() -> list[dict[str, Any]]:
            return [{"id": m.id, "content": m.content, "peer_id": m.peer_id, "metadata": m.metadata,
                     "created_at": m.created_at} for m in self.honcho.session(session_id).messages(size=2)]
        return await asyncio.to_thread(go)

    async def search(self, peer_id: str, query: str) -> list[str]:
        return await asyncio.to_thread(lambda: [m.content for m in self.honcho.peer(peer_id).search(query)])

    async def conclude(self, observer: str, observed: str, content: str) -> None:
        def go() -> None:
            view = self.honcho.peer(observer).conclusions_of(observed)
            view.create([{"content": content}])
            assert [c.content for c in view.list()] == [content]
        await asyncio.to_thread(go)

    async def representation(self, peer_id: str) -> str:
        return await asyncio.to_thread(lambda: str(self.honcho.peer(peer_id).representation()))

    async def clone(self, session_id: str, message_id: str) -> str:
        return await asyncio.to_thread(lambda: self.honcho.session(session_id).clone(message_id=message_id).id)


class ClientDriver:
    """The project's own client."""

    def __init__(self, url: str, workspace: str) -> None:
        self.client = HonchoClient(workspace, base_url=url, api_key="test-key")

    async def open_session(self, session_id: str, peers: list[str]) -> None:
        for peer in peers:
            await self.client.get_or_create_peer(peer)
        await self.client.get_or_create_session(session_id, {})
        await self.client.add_peers(session_id, {p: {} for p in peers})

    async def add(self, session_id: str, items: list[dict[str, Any]]) -> list[str]:
        sent = [{"peer_id": i["peer"], "content": i["content"], "metadata": i.get("metadata") or {},
                 **({"created_at": i["created_at"]} if i.get("created_at") else {})} for i in items]
        return [m["id"] for m in await self.client.add_messages(session_id, sent)]

    async def messages(self, session_id: str) -> list[dict[str, Any]]:
        return [{**m, "created_at": datetime.fromisoformat(m["created_at"])}
                for m in await self.client.list_messages(session_id)]

    async def search(self, peer_id: str, query: str) -> list[str]:
        return [m["content"] for m in await self.client.peer_search(peer_id, query)]

    async def conclude(self, observer: str, observed: str, content: str) -> None:
        made = await self.client.create_conclusions([{"content": content, "observer_id": observer,
                                                      "observed_id": observed}])
        assert [c["content"] for c in made] == [content]

    async def representation(self, peer_id: str) -> str:
        return await self.client.peer_representation(peer_id)

    async def clone(self, session_id: str, message_id: str) -> str:
        return str((await self.client.clone_session(session_id, message_id))["id"])


async def run_contract(driver: Driver, service: FakeHonchoService, workspace: str) -> None:
    await driver.open_session("s1", ["alice", "assistant"])
    ids = await driver.add("s1", [
        {"peer": "alice", "content": "I keep bees\x00 on the roof", "created_at": SENT_AT, "metadata": {"turn": 1}},
        {"peer": "assistant", "content": "Bees need water nearby."},
        {"peer": "alice", "content": "The hives face south."},
    ])
    assert len(ids) == 3 and len(set(ids)) == 3

    listed = await driver.messages("s1")
    assert [m["id"] for m in listed] == ids
    assert [m["content"] for m in listed] == ["I keep bees on the roof", "Bees need water nearby.",
                                              "The hives face south."]
    assert [m["peer_id"] for m in listed] == ["alice", "assistant", "alice"]
    assert listed[0]["metadata"] == {"turn": 1}
    assert listed[0]["created_at"] == datetime(2025, 3, 4, 5, 6, 7, 123000, tzinfo=UTC)
    assert "\x00" not in service.session_messages("s1", workspace)[0]["content"]

    assert await driver.search("alice", "bees roof") == ["I keep bees on the roof"]
    assert await driver.search("alice", "water") == []

    await driver.conclude("assistant", "alice", "alice keeps bees")
    representation = await driver.representation("alice")
    assert "alice keeps bees" in representation and "hives face south" in representation

    clone_id = await driver.clone("s1", ids[1])
    assert clone_id != "s1"
    assert [m["content"] for m in await driver.messages(clone_id)] == ["I keep bees on the roof",
                                                                       "Bees need water nearby."]


async def test_official_sdk_runs_the_contract_against_the_served_fake(served: HonchoServer,
                                                                      service: FakeHonchoService) -> None:
    await run_contract(SdkDriver(served.url, "sdk"), service, "sdk")
    assert "sdk" in service.workspace_ids() and {"alice", "assistant"} <= set(service.peer_ids("sdk"))


async def test_honcho_client_runs_the_same_contract_over_the_same_server(served: HonchoServer,
                                                                         service: FakeHonchoService) -> None:
    driver = ClientDriver(served.url, "own")
    try:
        await run_contract(driver, service, "own")
    finally:
        await driver.client.aclose()


async def test_what_one_client_writes_the_other_reads(served: HonchoServer) -> None:
    own = ClientDriver(served.url, "shared")
    try:
        await own.open_session("s1", ["alice"])
        await own.add("s1", [{"peer": "alice", "content": "from the workbench", "created_at": SENT_AT}])
        read = await SdkDriver(served.url, "shared").messages("s1")
        assert [(m["content"], m["created_at"].isoformat()) for m in read] == [("from the workbench", SENT_AT)]
    finally:
        await own.client.aclose()


async def test_refusals_and_faults_reach_the_sdk_as_its_own_errors(served: HonchoServer,
                                                                  service: FakeHonchoService) -> None:
    from honcho.http.exceptions import RateLimitError, UnprocessableEntityError

    honcho = Honcho(base_url=served.url, workspace_id="w", api_key="k", max_retries=0)
    with pytest.raises(UnprocessableEntityError):
        await asyncio.to_thread(honcho.peer, "user:o1")
    service.fail_next(429, retry_after=1)
    with pytest.raises(RateLimitError) as caught:
        await asyncio.to_thread(honcho.peer, "alice")
    assert caught.value.retry_after == 1
    assert "alice" not in service.peer_ids("w")


def _summaries_through_the_sdk(url: str) -> list[tuple[int, bool, bool, bool]]:
    """(messages, short summary?, long summary?, context summary?) as the session grows, read with
    the official SDK; a second session with summaries turned off by its configuration."""
    honcho = Honcho(base_url=url, workspace_id="w", api_key="k", max_retries=0)
    alice = honcho.peer("alice")
    seen: list[tuple[int, bool, bool, bool]] = []
    for name, config in (("grows", None), ("quiet", {"summary": {"enabled": False}})):
        session = honcho.session(name, configuration=config) if config else honcho.session(name)
        count = 0
        for step in (19, 1, 39, 1):
            made = session.add_messages([alice.message(f"note {count + n + 1}") for n in range(step)])
            count += step
            got = session.summaries()
            context = session.context(tokens=10_000)
            seen.append((count, got.short_summary is not None, got.long_summary is not None,
                         context.summary is not None))
            if got.short_summary is not None:
                assert got.short_summary.message_id == made[-1].id if count % 20 == 0 else True
    return seen


async def test_summaries_come_at_the_20th_and_60th_message_as_in_honcho(served: HonchoServer) -> None:
    seen = await asyncio.to_thread(_summaries_through_the_sdk, served.url)
    assert seen[:4] == [(19, False, False, False), (20, True, False, True), (59, True, False, True),
                        (60, True, True, True)]
    assert seen[4:] == [(19, False, False, False), (20, False, False, False), (59, False, False, False),
                        (60, False, False, False)]
