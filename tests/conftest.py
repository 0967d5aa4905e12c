"""Fixtures shared across the test folders."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from services.cloud import FakeCloud
from services.served.server import CloudServer, bind_socket, origin_url


@pytest.fixture
async def served_cloud() -> AsyncIterator[tuple[FakeCloud, CloudServer]]:
    """A FakeCloud served over a real loopback socket in this process (no workspace folder)."""
    sock = bind_socket("127.0.0.1", 0)
    url = origin_url(*sock.getsockname()[:2])
    cloud = FakeCloud("app", issuer=url, runtime_url=url)
    server = CloudServer(cloud, sock)
    await server.start()
    yield cloud, server
    await server.stop()


SLOW_FOLDERS = ("tests/ui/", "tests/snapshots/", "tests/test_readme.py")
"""Where every test drives a whole window or a reader's whole path: each is ``slow``."""


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``long`` (tens of seconds each) run first, the rest keep their order.

    xdist hands the first tests out to the workers in turn, so the long ones start at once, side by
    side, and the many short ones fill in after them: no worker is left with one long test at the
    end while the other waits.

    Pilot and snapshot tests, the README's blocks and every ``long`` test are also ``slow``, so
    ``-m "not slow"`` is the quick subset: the services, their contracts and the structure checks
    without the modules that take the most time (those say ``pytestmark = pytest.mark.slow``).
    """
    for item in items:
        path = item.path.as_posix()
        if item.get_closest_marker("long") is not None or any(f"/{folder}" in path for folder in SLOW_FOLDERS):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
