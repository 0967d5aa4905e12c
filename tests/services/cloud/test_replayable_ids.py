"""``FakeCloud.replayable_ids``: one script replayed on a fresh cloud makes the same ids."""

from __future__ import annotations

from services.cloud import FakeCloud
from services.sdk import MemoryConnectionStore


async def _script(cloud: FakeCloud) -> list[str]:
    await cloud.connect(MemoryConnectionStore(), "user:ada")
    client = cloud.crouter("user:ada")
    run = await client.runs.start(prompt="hello", id="run_fixed")
    first = await client.runs.message(run.id, "one", start_turn=False)
    second = await client.runs.message(run.id, "two", start_turn=False)
    return [first["message"]["id"], second["message"]["id"]]


async def test_the_same_script_makes_the_same_ids_on_a_fresh_cloud() -> None:
    ids = []
    for _ in range(2):
        cloud = FakeCloud("app")
        with cloud.replayable_ids("world:a"):
            ids.append(await _script(cloud))
    assert ids[0] == ids[1]
    assert len(set(ids[0])) == 2


async def test_ids_are_random_again_outside_the_block_and_differ_per_salt() -> None:
    a, b, plain = FakeCloud("app"), FakeCloud("app"), FakeCloud("app")
    with a.replayable_ids("world:a"):
        ids_a = await _script(a)
    with b.replayable_ids("world:b"):
        ids_b = await _script(b)
    assert ids_a != ids_b
    assert a.state.id_salt is None
    ids_plain = await _script(plain)
    again = FakeCloud("app")
    assert await _script(again) != ids_plain  # drawn at random without a salt
