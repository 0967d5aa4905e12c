"""Each event's JSON text is encoded once on a served cloud: the store writes the text the streams send."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from services.cloud import FakeCloud
from services.cloud.stream import EventStream, EventTexts, event_json
from services.sdk import MemoryConnectionStore
from services.served.persist import CloudStore

URL = "http://127.0.0.1:9"


async def test_the_stored_text_of_an_event_is_the_text_its_stream_sends(tmp_path: Path) -> None:
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(tmp_path / "cloud.db")
    await store.load(cloud)
    assert cloud.event_texts is not None
    await cloud.connect(MemoryConnectionStore(), "user:a", scopes=["crtr:llm"])
    run = await cloud.crouter("user:a").runs.start(prompt="one")
    fake = cloud.runs.get(run.id)
    head = fake.seq
    stream = EventStream(cloud, fake, head)
    fake.emit_many([("node.output_text.delta", {"delta": "é \U0001f600 \ud800 \x00", "entry_id": "e1"}),
                    ("node.output_text.delta", {"delta": "plain", "entry_id": "e1"})])
    await store.flush()  # the store encodes first (as a served answer's acknowledgement does)
    chunk = await asyncio.wait_for(stream.__aiter__().__anext__(), 5)
    await stream.aclose()
    await store.close()
    sent = [line[len(b"data: "):].decode("ascii") for line in chunk.split(b"\n") if line.startswith(b"data: ")]
    with sqlite3.connect(tmp_path / "cloud.db") as db:
        stored = [row[0] for row in db.execute("SELECT data FROM cloud_event WHERE run_id = ? AND seq > ? ORDER BY seq",
                                               (run.id, head))]
    assert sent == stored == [event_json(e) for e in fake.events[-2:]]
    assert json.loads(sent[0])["delta"] == "é \U0001f600 \ud800 \x00"  # ASCII escapes: any text, valid UTF-8


def test_the_texts_keep_the_newest_events_and_never_answer_for_another_object() -> None:
    texts = EventTexts(size=2)
    events = [{"seq": n, "text": f"t{n}"} for n in range(4)]
    assert [texts.text(e) for e in events] == [event_json(e) for e in events]
    assert len(texts._texts) == 2
    other = {"seq": 3, "text": "not the same"}
    assert texts.text(other) == event_json(other)
    assert texts.text(events[3]) == event_json(events[3])
