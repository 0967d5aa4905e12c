"""``workbench web``'s arguments and the Host/Origin checks it shares with the served cloud (no browser)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.served.guard import sender_refusal
from workbench.cli import main
from workbench.web import tab_command


@pytest.mark.parametrize(("args", "said"), [(["--tabs", "0"], "--tabs must be at least 1"),
                                            (["--port", "70000"], "--port must be between 0 and 65535")])
def test_bad_arguments_are_refused_in_one_line(tmp_path: Path, args: list[str], said: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["web", "--workspace", str(tmp_path / "ws"), *args]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "ws" / "serve.json").exists()  # nothing was served


def test_a_port_in_use_is_said_and_nothing_is_left_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        status = main(["web", "--workspace", str(tmp_path / "ws"), "--port", str(taken.getsockname()[1])])
    finally:
        taken.close()
    assert status == 2 and "cannot listen on 127.0.0.1" in capsys.readouterr().err
    assert not (tmp_path / "ws" / "serve.json").exists()  # refused before any server was started


def test_each_tab_runs_this_python_on_the_folder_or_the_demo(tmp_path: Path) -> None:
    import shlex
    import sys

    folder = tmp_path / "a folder; rm -rf x"
    words = shlex.split(tab_command(folder))
    assert words == ["exec", sys.executable, "-m", "workbench", "--workspace", str(folder)]  # quoted for the shell
    assert shlex.split(tab_command(None, demo=True))[-1] == "demo"


@pytest.mark.parametrize(("host", "origin", "site", "status"), [
    ("127.0.0.1:8791", None, "", None),
    ("127.0.0.1:8791", "http://127.0.0.1:8791", "same-origin", None),
    ("localhost:8791", "http://localhost:8791", "none", None),
    ("evil.example:8791", None, "", 421),
    ("127.0.0.1:8791", "http://evil.example", "", 403),
    ("127.0.0.1:8791", "null", "", 403),
    ("127.0.0.1:8791", "http://127.0.0.1:8792", "", 403),
    ("127.0.0.1:8791", None, "cross-site", 403),
    ("127.0.0.1:8791", None, "same-site", 403),
])
def test_the_sender_checks_are_the_served_clouds(host: str, origin: str | None, site: str, status: int | None) -> None:
    refusal = sender_refusal(host, origin, site, origins=frozenset({"http://127.0.0.1:8791"}))
    assert (None if refusal is None else refusal.status) == status
