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


SLOW_FOLDERS = ("tests/ui/", "tests/snapshots/", "tests/web/", "tests/test_readme.py")
"""Where every test drives a whole window (in a terminal or a browser) or a reader's whole path: each is ``slow``."""
SLOW_MODULES = (
    # the modules whose tests took the most time in a full run (seconds of both workers, measured):
    # without them and the folders above, the quick subset keeps about a seventh of the suite's time
    "tests/services/knowledge/okf/test_okf_publication.py", "tests/services/canvas/test_receivers.py",
    "tests/services/cloud/test_failures.py", "tests/record/test_commands.py",
    "tests/services/knowledge/okf/test_okf_git_crash.py", "tests/services/canvas/test_documents.py",
    "tests/services/test_workspace.py", "tests/services/knowledge/okf/test_okf_git_custody.py",
    "tests/record/test_okf.py", "tests/services/canvas/test_graph.py",
    "tests/services/knowledge/okf/test_okf_recovery.py", "tests/services/canvas/test_engines.py",
    "tests/record/test_session.py", "tests/services/canvas/test_text_policy.py", "tests/attach/test_app_actions.py",
    "tests/services/canvas/test_rule_index.py", "tests/services/canvas/test_delivery.py",
    "tests/services/canvas/test_team_canvas.py", "tests/services/canvas/test_bridge.py",
    "tests/services/canvas/test_counts_and_name_index.py", "tests/security/test_openapi.py",
    "tests/services/sdk/test_retries.py", "tests/test_import_contract.py", "tests/served/test_export_import.py",
    "tests/services/test_run_mirror.py", "tests/services/test_read_model_times.py", "tests/honcho/test_memory_view.py",
    "tests/served/test_serve.py", "tests/attach/test_two_windows.py", "tests/security/test_bad_input.py",
    "tests/services/cloud/test_fake_run.py", "tests/attach/test_boundary.py",
    "tests/services/knowledge/okf/test_okf_harvest.py", "tests/served/test_store_history.py",
    "tests/served/test_large_reads.py", "tests/record/test_served.py", "tests/record/test_export_hostile.py",
    "tests/security/test_git_calls.py", "tests/security/test_url_secrets.py", "tests/security/test_paths.py",
    "tests/services/knowledge/okf/test_okf_git_branch_names.py", "tests/services/test_run_forks.py",
)
"""Modules left out of the quick subset as a whole (``pytestmark`` in each would say the same)."""


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``long`` (tens of seconds each) run first, the rest keep their order.

    xdist hands the first tests out to the workers in turn, so the long ones start at once, side by
    side, and the many short ones fill in after them: no worker is left with one long test at the
    end while the other waits.

    Pilot and snapshot tests, the README's blocks and every ``long`` test are also ``slow``, so
    ``-m "not slow"`` is the quick subset: the services, their contracts and the structure checks
    without the modules that take the most time (``SLOW_MODULES``).
    """
    for item in items:
        path = item.path.as_posix()
        if (item.get_closest_marker("long") is not None or any(f"/{folder}" in path for folder in SLOW_FOLDERS)
                or any(path.endswith("/" + module) for module in SLOW_MODULES)):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
