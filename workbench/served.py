"""The ``workbench serve`` and ``workbench connect`` commands (``workbench --serve`` checks too)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import httpx

    from services.attached.client import RemoteCloud
    from services.control_wire import ConnectionJSON

__all__ = ["serve_command", "connect_command", "check_ui_serve", "LimitOptions", "served_or_stored", "StoredCloud"]


class LimitOptions(TypedDict, total=False):
    """The ``--max-*`` options given to ``workbench serve``, named as ``Limits`` fields."""

    body_bytes: int
    json_depth: int
    prompt_chars: int
    message_chars: int
    wait_s: float
    streams_per_token: int


def _say(text: str) -> None:
    print(text, flush=True)


def _fail(command: str, error: Exception) -> int:
    from services.text import sanitize

    print(f"workbench {command}: {sanitize(str(error))}", file=sys.stderr, flush=True)
    return 2


def serve_command(
    folder: Path,
    *,
    host: str,
    port: int | None,
    allow_remote: bool,
    export: Path | None,
    import_file: Path | None,
    notice_url: str | None = None,
    public_url: str | None = None,
    limits: LimitOptions | None = None,
) -> int:
    """``workbench serve``; returns the exit status."""
    from services.cloud.limits import Limits
    from services.errors import ServiceError
    from services.served.server import DEFAULT_PORT, serve_workspace

    try:
        caps = Limits(**(limits or {}))
    except ValueError as exc:
        return _fail("serve", exc)
    if port is not None and not 0 <= port <= 65535:
        return _fail("serve", ValueError("--port must be between 0 and 65535"))
    if export is not None and import_file is not None:
        return _fail("serve", ValueError("--export and --import do not go together"))
    try:
        if export is not None:
            count = asyncio.run(export_state(folder, export))
            _say(f"exported the cloud state of {folder} ({count}) to {export}")
            return 0
        asyncio.run(serve_workspace(folder, host=host, port=DEFAULT_PORT if port is None else port,
                                    allow_remote=allow_remote, import_file=import_file, notice_url=notice_url,
                                    public_url=public_url, limits=caps, say=_say))
    except ServiceError as exc:
        return _fail("serve", exc)
    except OSError as exc:  # a workspace that cannot be written, a disk that is full: one line
        where = f" ({exc.filename})" if exc.filename else ""
        return _fail("serve", OSError(f"{exc.strerror or exc}{where}"))
    except KeyboardInterrupt:
        return 130
    return 0


class StoredCloud:
    """A workspace's kept cloud state (``cloud.db``) while no server runs: held (``claim_workspace``),
    so no server starts until the command is done with it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @property
    def db(self) -> Path:
        """The state's database file (absent until the folder is first served)."""
        from services.served.persist import CLOUD_DB

        return self.folder / CLOUD_DB

    async def served_url(self) -> str | None:
        """The URL the state was last served at (its tokens' issuer), or None when never served."""
        from services.served.persist import CloudStore

        if not self.db.exists():
            return None
        probe = CloudStore(self.db)
        try:
            return await asyncio.to_thread(probe.stored_meta, "served_url")
        finally:
            probe.engine.dispose()


@asynccontextmanager
async def served_or_stored(folder: Path) -> AsyncIterator[RemoteCloud | StoredCloud]:
    """The one "live server or local store" choice: the control client of the server that serves
    ``folder`` (a live ``serve.json``), else the folder's stored cloud, held for the duration."""
    from services.attached.client import RemoteCloud
    from services.served.server import claim_workspace, live_serve_info

    if live_serve_info(folder) is not None:
        async with RemoteCloud.from_workspace(folder) as remote:
            yield remote
        return
    lock = claim_workspace(folder)  # no server may start meanwhile
    try:
        yield StoredCloud(Path(folder))
    finally:
        lock.release()


async def export_state(folder: Path, target: Path) -> str:
    """Write the workspace's cloud state to ``target`` (0600: it holds the signing key)."""
    from services.served.persist import CloudStore
    from services.cloud.state import CloudStateError
    from services.files import atomic_write_bytes

    empty = CloudStateError(f"{folder} holds no cloud state yet (serve it once first)")
    async with served_or_stored(folder) as cloud:
        if isinstance(cloud, StoredCloud):
            if not cloud.db.exists():
                raise empty
            store = CloudStore(cloud.db)
            try:
                stored = await asyncio.to_thread(store.stored_state)
            finally:
                store.engine.dispose()
            if stored is None:
                raise empty
            doc = stored
        else:
            doc = await cloud.export_state()
    # ASCII escapes: every text the cloud holds (lone surrogates included) survives the round trip
    data = (json.dumps(doc, indent=1) + "\n").encode("ascii")
    await asyncio.to_thread(atomic_write_bytes, Path(target), data, mode=0o600)
    return f"{len(doc['users'])} people, {len(doc['runs'])} runs"


def connect_command(folder: Path, user_id: str | None, scopes: list[str] | None, *, key: Path | None = None,
                    assertion: bool = False, access_token: bool = False) -> int:
    """``workbench connect``: the connection as JSON, through the server when it runs; or, with
    ``key``, only a client assertion (``assertion``) or a freshly refreshed access token (``access_token``)."""
    from services.errors import ServiceError

    if (assertion or access_token) and key is None:
        return _fail("connect", ValueError("--assertion and --access-token need --key FILE (your app's private key)"))
    if user_id is None and not assertion:
        return _fail("connect", ValueError("name the person to connect, e.g. user:ada"))
    try:
        pem = app_key(key) if key is not None else None
        if assertion:
            assert pem is not None
            print(asyncio.run(client_assertion(folder, pem)), flush=True)
            return 0
        assert user_id is not None
        answer = asyncio.run(_connect(folder, user_id, scopes, refresh_with=pem))
    except (ServiceError, OSError) as exc:
        return _fail("connect", exc)
    print(answer["access_token"] if access_token else json.dumps(answer, indent=2), flush=True)
    return 0


def app_key(path: Path) -> str:
    """The app's private key at ``path`` (PEM), made there (mode 0600) when the file does not exist yet."""
    from services.cloud import generate_private_key_pem
    from services.files import CorruptFileError, atomic_write_bytes, read_limited
    from services.sdk.assertion import load_signing_key

    path = Path(path).expanduser()
    if not path.exists():
        atomic_write_bytes(path, generate_private_key_pem().encode(), mode=0o600)
    try:  # a regular file of at most 64 KiB (an RSA key in PEM is a few); a device or FIFO is refused
        pem = read_limited(path, 64 * 1024).decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptFileError(f"{path} is not a PEM key (not UTF-8 text)") from None
    load_signing_key(pem)  # a file that is not an RSA or P-256 key is refused here, in plain words
    return pem


async def client_assertion(folder: Path, pem: str) -> str:
    """A client assertion for the workspace's token endpoint, signed with ``pem``."""
    import time

    from services.sdk.assertion import load_signing_key
    from services.wire import DIRECTORY_TOKEN_PATH

    issuer, client_id = await _issuer(folder)
    return load_signing_key(pem).assertion(client_id=client_id, audience=issuer.rstrip("/") + DIRECTORY_TOKEN_PATH,
                                           now=time.time())


async def _issuer(folder: Path) -> tuple[str, str]:
    """The issuer (the served URL, else the one the state was last served at) and the client id."""
    from services.served.server import DEFAULT_PORT, live_serve_info, origin_url

    info = live_serve_info(folder)
    url = str(info["url"]) if info is not None else await StoredCloud(Path(folder)).served_url()
    return url or origin_url("127.0.0.1", DEFAULT_PORT), "workbench"


async def _connect(folder: Path, user_id: str, scopes: list[str] | None,
                   refresh_with: str | None = None) -> ConnectionJSON:
    """The connection JSON for ``user_id``, from the server when one serves the folder, else from the
    stored cloud (opened here, with the issuer it was last served at); refreshed with ``refresh_with``."""
    from services.served.control import connection_json
    from services.served.persist import open_durable_cloud
    from services.served.server import DEFAULT_PORT, origin_url

    async with served_or_stored(folder) as cloud:
        if not isinstance(cloud, StoredCloud):
            answer = await cloud.connection(user_id, scopes=scopes)
            return await _refreshed(answer, refresh_with, None) if refresh_with else answer
        url = await cloud.served_url()
        fake, store = await open_durable_cloud(cloud.folder, url or origin_url("127.0.0.1", DEFAULT_PORT))
        try:
            answer = await connection_json(fake, user_id, scopes, None)
            return await _refreshed(answer, refresh_with, fake.transport) if refresh_with else answer
        finally:
            await store.close()


async def _refreshed(answer: ConnectionJSON, pem: str, transport: httpx.AsyncBaseTransport | None) -> ConnectionJSON:
    """``answer`` with its tokens refreshed through the directory, as the app with key ``pem`` would
    (``transport``: the in-process cloud's; None: over the network to the served one)."""
    from services.attached.client import connection_of
    from services.sdk import MemoryConnectionStore, OAuth2Client

    store = MemoryConnectionStore()
    await store.save(connection_of(answer))
    oauth = OAuth2Client(client_id=answer["client_id"], issuer=answer["issuer"], private_key=pem, store=store,
                         transport=transport)
    try:
        await oauth.client(answer["user_id"])  # the first call refreshes the expired token
        fresh = await store.get(answer["user_id"])
    finally:
        await oauth.aclose()
    assert fresh is not None
    refreshed = answer.copy()
    refreshed["access_token"] = fresh.access_token
    refreshed["refresh_token"] = fresh.refresh_token
    refreshed["expires_at"] = fresh.expires_at
    return refreshed


def check_ui_serve(folder: Path, port: int | None) -> str | None:
    """Why ``workbench --serve`` cannot start, or None."""
    from services.served.server import ServeError, check_not_served, live_serve_info

    if port is not None and not 0 <= port <= 65535:
        return "--port must be between 0 and 65535"
    info = live_serve_info(folder)
    if info is not None:
        served_port = urlsplit(str(info.get("url", ""))).port
        if port not in (None, 0) and served_port is not None and served_port != port:
            return (f"{folder} is already served at {info.get('url')} (process {info.get('pid')}), not on port "
                    f"{port}: run it without --port to open a window attached to that server, or stop that "
                    "server first to serve on this port")
        return None  # the window attaches to that server (or says why it cannot) instead of serving again
    try:
        check_not_served(folder)
    except ServeError as exc:
        return str(exc)
    return None
