"""A window's control read on a kept-alive connection the server closes without answering is asked
once more (a read is safe to ask again); a change is not: it is refused as unanswered. A real
loopback server that closes its first connection unanswered."""

from __future__ import annotations

import asyncio

import pytest

from services.attached.client import RemoteCloud
from services.served.errors import ControlError


async def _server(closes: int) -> tuple[asyncio.Server, list[str]]:
    """A server that closes its first ``closes`` requests unanswered, then answers ``{"ok": true}``."""
    seen: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
            if not head:
                break
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            if length:
                await reader.readexactly(length)
            seen.append(head.split(b" ")[0].decode())
            if len(seen) <= closes:
                break
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 12\r\n\r\n"
                         b'{"ok": true}')
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, seen


async def test_a_read_closed_unanswered_is_asked_once_more_and_a_change_is_not() -> None:
    server, seen = await _server(closes=1)
    port = server.sockets[0].getsockname()[1]
    remote = RemoteCloud(f"http://127.0.0.1:{port}", "t")
    try:
        assert await remote.call("GET", "/people") == {"ok": True}
        assert seen == ["GET", "GET"]
        seen.clear()
        server_two, seen_two = await _server(closes=1)
        port_two = server_two.sockets[0].getsockname()[1]
        other = RemoteCloud(f"http://127.0.0.1:{port_two}", "t")
        with pytest.raises(ControlError) as refused:
            await other.call("POST", "/runs/run_x/settle", {"result": "done"})
        assert refused.value.status == 503 and "did not answer" in str(refused.value)
        assert seen_two == ["POST"]  # not sent twice
        await other.aclose()
        server_two.close()
    finally:
        await remote.aclose()
        server.close()
