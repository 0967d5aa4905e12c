"""What a cloud keeps per request is a window set by its limits, not a history: idempotency
answers and each person's grant reads."""

from __future__ import annotations

from services.cloud import FakeCloud
from services.cloud.limits import Limits
from tests.services.cloud.conftest import USER


async def test_idempotency_answers_are_a_window_of_the_newest_keys(cloud: FakeCloud, client) -> None:
    cloud.limits = Limits(idempotency_keys=4)
    runs = [await client.runs.start(prompt=f"p{n}", idempotency_key=f"k{n}") for n in range(12)]
    assert len(cloud.state.idempotency) <= 4
    assert (await client.runs.start(prompt="p11", idempotency_key="k11")).id == runs[11].id  # still replayed
    again = await client.runs.start(prompt="p0", idempotency_key="k0")  # out of the window: a new request
    assert again.id != runs[0].id
    assert len(cloud.state.idempotency) <= 4


async def test_a_persons_grant_reads_keep_the_newest_calls(cloud: FakeCloud, client) -> None:
    cloud.limits = Limits(calls=8)
    for _ in range(30):
        await client.grant.get()
    reads = cloud.user(USER).reads
    assert 8 <= len(reads) <= 9
    assert cloud.calls[-1] is reads[-1]
