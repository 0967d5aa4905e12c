"""The typed shapes of ``services.honcho_wire`` are the ones the fake really answers: every route's answer
carries exactly the keys its TypedDict declares, and a scripted card is always a list of lines."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from services.honcho import FakeHonchoService
from services.honcho_wire import (
    Conclusion,
    Message,
    Page,
    Peer,
    PeerCardAnswer,
    PeerContext,
    QueueStatus,
    RepresentationAnswer,
    Session,
    SessionContext,
    SessionPeerConfig,
    SessionSummaries,
    Summary,
    Workspace,
)

W = "/v3/workspaces/shapes"


@pytest.fixture
async def http() -> AsyncIterator[tuple[FakeHonchoService, httpx.AsyncClient]]:
    service = FakeHonchoService()
    async with httpx.AsyncClient(base_url="http://honcho.fake", transport=service.transport) as client:
        yield service, client
    service.close()


def keys(shape: type) -> set[str]:
    return set(shape.__required_keys__) | set(shape.__optional_keys__)  # type: ignore[attr-defined]


async def ok(client: httpx.AsyncClient, method: str, path: str, **kwargs: object) -> object:
    response = await client.request(method, path, **kwargs)  # type: ignore[arg-type]
    assert response.status_code in (200, 201), response.text
    return response.json()


async def test_every_answer_has_the_keys_of_its_shape(http: tuple[FakeHonchoService, httpx.AsyncClient]) -> None:
    _, client = http
    workspace = await ok(client, "POST", "/v3/workspaces", json={"id": "shapes", "metadata": {"k": 1}})
    peer = await ok(client, "POST", f"{W}/peers", json={"id": "alice"})
    await ok(client, "POST", f"{W}/peers", json={"id": "bot"})
    session = await ok(client, "POST", f"{W}/sessions", json={
        "id": "s1", "peers": {"alice": {"observe_me": True}, "bot": {"observe_others": True}}})
    messages = await ok(client, "POST", f"{W}/sessions/s1/messages", json={"messages": [
        {"content": "alice likes green tea", "peer_id": "alice", "metadata": {"turn": 1}},
        {"content": "noted: green tea", "peer_id": "bot"}]})
    conclusions = await ok(client, "POST", f"{W}/conclusions", json={"conclusions": [
        {"content": "alice drinks tea", "observer_id": "bot", "observed_id": "alice"}]})
    assert isinstance(messages, list) and isinstance(conclusions, list)
    await ok(client, "POST", f"{W}/sessions/s1/messages", json={"messages": [  # 20 in all: the first summary
        {"content": f"turn {n}", "peer_id": "alice"} for n in range(3, 21)]})

    singles: list[tuple[type, object]] = [
        (Workspace, workspace), (Peer, peer), (Session, session), (Message, messages[0]),
        (Conclusion, conclusions[0]),
        (Page, await ok(client, "POST", f"{W}/sessions/s1/messages/list", json={})),
        (SessionPeerConfig, await ok(client, "GET", f"{W}/sessions/s1/peers/alice/config")),
        (SessionContext, await ok(client, "GET", f"{W}/sessions/s1/context", params={"peer_target": "alice"})),
        (SessionSummaries, await ok(client, "GET", f"{W}/sessions/s1/summaries")),
        (PeerContext, await ok(client, "GET", f"{W}/peers/bot/context", params={"target": "alice"})),
        (PeerCardAnswer, await ok(client, "GET", f"{W}/peers/bot/card")),
        (RepresentationAnswer, await ok(client, "POST", f"{W}/peers/alice/representation", json={})),
        (QueueStatus, await ok(client, "GET", f"{W}/queue/status")),
    ]
    for shape, answer in singles:
        assert isinstance(answer, dict), shape.__name__
        assert set(answer) == keys(shape), shape.__name__
    summaries = singles[8][1]
    assert isinstance(summaries, dict)
    assert set(summaries["short_summary"]) == keys(Summary)
    page = singles[5][1]
    assert isinstance(page, dict)
    assert all(set(item) == keys(Message) for item in page["items"])


async def test_a_scripted_card_is_always_a_list_of_lines(http: tuple[FakeHonchoService, httpx.AsyncClient]) -> None:
    service, client = http
    await ok(client, "POST", f"{W}/peers", json={"id": "alice"})
    service.respond("card", lambda ask: f"{ask.peer_id} likes tea")
    assert await ok(client, "GET", f"{W}/peers/alice/card") == {"peer_card": ["alice likes tea"]}
    service.respond("card", lambda ask: ["first", "second"])
    context = await ok(client, "GET", f"{W}/peers/alice/context")
    assert isinstance(context, dict) and context["peer_card"] == ["first", "second"]
    service.respond("card", None)
    assert await ok(client, "GET", f"{W}/peers/alice/card") == {"peer_card": None}
