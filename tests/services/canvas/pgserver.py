"""A throwaway local PostgreSQL server for the canvas tests and benchmarks.

``server_url()`` answers ``WORKBENCH_TEST_PG_URL`` when it is set (CI starts the server, see
``.ci/run``). Otherwise, when Debian's server binaries are installed (``/usr/lib/postgresql/*/bin``),
it runs ``initdb`` into a temporary folder and ``pg_ctl start`` on a free local port (as the
``postgres`` user when we are root, since the server refuses to run as root), and stops it at exit.
It answers ``None`` when neither is available; callers skip PostgreSQL then, unless ``CI`` is set.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import socket
import subprocess
import tempfile

__all__ = ["server_url", "pg_bin"]

_started: dict[str, str | None] = {}


def pg_bin() -> str | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or ``None``."""
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(folder, "initdb")) and os.path.exists(os.path.join(folder, "pg_ctl")):
            return folder
    found = shutil.which("initdb")
    return os.path.dirname(found) if found and shutil.which("pg_ctl") else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_owner(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


def server_url() -> str | None:
    """A ``postgresql+psycopg://`` URL of a running server's ``postgres`` database, or ``None``."""
    if "url" in _started:
        return _started["url"]
    url = os.environ.get("WORKBENCH_TEST_PG_URL") or _start()
    _started["url"] = url
    return url


def _start() -> str | None:
    folder = pg_bin()
    if folder is None:
        return None
    base = tempfile.mkdtemp(prefix="workbench-pg-")
    data = os.path.join(base, "data")
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
    port = _free_port()
    subprocess.run(_as_owner([f"{folder}/initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                              "--no-sync"]), check=True, capture_output=True)
    options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    subprocess.run(_as_owner([f"{folder}/pg_ctl", "-D", data, "-o", options, "-l", os.path.join(base, "log"),
                              "-w", "start"]), check=True, capture_output=True)

    def stop() -> None:
        subprocess.run(_as_owner([f"{folder}/pg_ctl", "-D", data, "-m", "immediate", "stop"]), capture_output=True)
        shutil.rmtree(base, ignore_errors=True)

    atexit.register(stop)
    return f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
