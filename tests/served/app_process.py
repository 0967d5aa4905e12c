"""A small app in its own process: the project's SDK against a served cloud, over real sockets.

It reads one JSON command per line on stdin and answers one JSON line on stdout:

- ``{"cmd": "connect", "connection": {...}}`` stores the connection (as ``workbench connect`` prints it)
- ``{"cmd": "start", "prompt": ...}`` starts a run -> ``{"run": id, "status": ...}``
- ``{"cmd": "turn", "run": id, "after": n}`` streams from ``after`` until the root turn completes
  -> ``{"stop_reason", "error", "text", "cursor"}`` (or ``{"error_code": ...}`` when refused)
- ``{"cmd": "get", "run": id}`` -> ``{"status": ...}`` or ``{"error_code": ...}``
- ``{"cmd": "follow", "run": id}`` streams in the background, printing ``{"event": seq, "type"}``
  for each event as it arrives, reconnecting for as long as it takes
- ``{"cmd": "stats"}`` -> ``{"refreshes": n}``; ``{"cmd": "quit"}``
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from services.cloud import generate_private_key_pem
from services.sdk import Connection, CrouterError, MemoryConnectionStore, OAuth2Client

FIELDS = ("user_id", "access_token", "refresh_token", "expires_at", "scope", "runtime_url", "runtime_id")


def say(value: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def refused(exc: CrouterError) -> dict[str, Any]:
    return {"error_code": exc.code, "error_type": type(exc).__name__}


async def main() -> None:
    store = MemoryConnectionStore()
    oauth: OAuth2Client | None = None
    user_id = ""
    key = generate_private_key_pem("ec")
    tasks: set[asyncio.Task[None]] = set()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            break
        command = json.loads(line)
        cmd = command["cmd"]
        if cmd == "quit":
            break
        try:
            if cmd == "connect":
                conn = command["connection"]
                user_id = conn["user_id"]
                await store.save(Connection(**{k: conn[k] for k in FIELDS}))
                if oauth is None:
                    oauth = OAuth2Client(client_id=conn["client_id"], issuer=conn["issuer"], private_key=key,
                                         store=store, max_retries=0)
                say({"ok": True})
            elif cmd == "start":
                client = await oauth.client(user_id)
                run = await client.runs.start(prompt=command.get("prompt", "hello"))
                say({"run": run.id, "status": run.status})
            elif cmd == "get":
                client = await oauth.client(user_id)
                run = await client.runs.get(command["run"])
                say({"status": run.status, "last_turn_error": run.raw.get("last_turn_error")})
            elif cmd == "turn":
                client = await oauth.client(user_id)
                stream = client.runs.events(command["run"], after=command.get("after"))
                text = ""
                try:
                    async for event in stream:
                        if event.node_id != command["run"]:
                            continue
                        if event.type == "node.output_text.done":
                            text = event.data.get("text", "")
                        if event.type == "node.turn.completed":
                            say({"stop_reason": event.data.get("stop_reason"), "error": event.data.get("error"),
                                 "text": text, "cursor": stream.cursor})
                            break
                finally:
                    await stream.aclose()
            elif cmd == "follow":
                client = await oauth.client(user_id)
                tasks.add(asyncio.ensure_future(follow(client, command["run"])))
                say({"following": command["run"]})
            elif cmd == "stats":
                say({"refreshes": oauth.refresh_count if oauth else 0})
            else:
                say({"unknown": cmd})
        except CrouterError as exc:
            say(refused(exc))
    for task in tasks:
        task.cancel()
    if oauth is not None:
        await oauth.aclose()


async def follow(client: Any, run_id: str) -> None:
    stream = client.runs.events(run_id, after=0)
    while True:
        try:
            async for event in stream:
                say({"event": event.seq, "type": event.type})
            stream = client.runs.events(run_id, after=stream.cursor)  # an idle close: reopen
        except CrouterError as exc:
            say({"follow_error": exc.code})
            return


if __name__ == "__main__":
    asyncio.run(main())
