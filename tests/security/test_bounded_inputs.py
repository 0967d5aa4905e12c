"""Every file read from outside is bounded before it is parsed: one table per reader.

A file nested far deeper than any real one, a link to ``/dev/zero`` (endless), a FIFO (an open
that would wait for a writer) and a folder are each refused in one line, never read without end
and never a ``RecursionError``: the state ``workbench serve --import`` reads, a recording
(``replay``, ``export-test``, ``demo --from``), the settings file, ``serve.json``, OKF's JSON files,
the memory outbox and its state files, the Honcho fake's older JSON state, and a repository's
``okf-base.json``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.errors import ServiceError
from services.files import CorruptFileError, json_deeper_than, read_json, read_limited
from services.knowledge.okf.errors import OkfConfigError
from services.knowledge.okf.git import descriptor_of
from services.honcho.store import FakeHonchoStateError, open_store
from services.knowledge.outbox.models import OutboxWriteError
from services.knowledge.outbox.stores import OutboxStores
from services.served.serve_file import SERVE_FILE, read_serve_info
from workbench.cli import main
from workbench.settings import load_config

DEEP = 800
"""As deep as the state in the report: past every limit, within what ``json.loads`` follows."""


def _deep_json() -> str:
    return "[" * DEEP + "]" * DEEP


def _hostile(kind: str, path: Path) -> Path:
    """Make ``path`` the hostile file ``kind``; returns it."""
    if kind == "deep":
        path.write_text(_deep_json())
    elif kind == "deeper":  # past what the parser follows: RecursionError without the text check
        path.write_text('{"a":' * 200_000 + "1" + "}" * 200_000)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    return path


KINDS = ["deep", "deeper", "dev-zero", "fifo", "folder"]


@pytest.mark.parametrize("kind", KINDS)
def test_read_json_refuses_before_parsing(kind: str, tmp_path: Path) -> None:
    path = _hostile(kind, tmp_path / "doc.json")
    with pytest.raises(CorruptFileError) as caught:
        read_json(path)
    assert str(path) in str(caught.value)


def test_read_limited_reads_at_most_one_byte_past_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 1001)
    assert read_limited(path, 1001) == b" " * 1001
    with pytest.raises(CorruptFileError, match="larger than the limit of 1000 bytes"):
        read_limited(path, 1000)


@pytest.mark.parametrize(("text", "depth", "deeper"), [
    ("[]", 1, False), ("[[]]", 1, True), ('{"a": [{"b": "[[[["}]}', 3, False), ('{"a": [{"b": {}}]}', 3, True),
    ('["\\"[[[["]', 1, False), ("[" * 5 + "]" * 5, 5, False), ("[" * 6 + "]" * 6, 5, True),
])
def test_nesting_is_told_from_the_text(text: str, depth: int, deeper: bool) -> None:
    assert json_deeper_than(text.encode(), depth) is deeper


# -- workbench serve --import, through the real command line ---------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_serve_import_refuses_in_one_line(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = _hostile(kind, tmp_path / "state.json")
    status = main(["serve", "--workspace", str(tmp_path / "ws"), "--port", "0", "--import", str(state)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("workbench serve: ") and err.count("\n") == 1, err
    assert ("not a regular file" in err) if kind in ("dev-zero", "fifo", "folder") else ("nested" in err)
    assert not (tmp_path / "ws" / SERVE_FILE).exists()


# -- recordings: replay, export-test, demo --from ---------------------------------------------------


@pytest.mark.parametrize("command", [["replay"], ["export-test"], ["demo", "--headless", "--from"]])
@pytest.mark.parametrize("kind", ["deep", "deeper", "dev-zero", "fifo", "folder", "endless-line"])
def test_a_recording_is_refused_in_one_line(command: list[str], kind: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "session.jsonl"
    if kind == "endless-line":  # a regular file whose first line never ends within a line's limit
        path.write_bytes(b"[" + b" " * (5 * 1024 * 1024))
    else:
        _hostile(kind, path)
    status = main([*command, str(path)])
    out = capsys.readouterr().out
    assert status == 2
    assert out.startswith("workbench ") and out.count("\n") == 1, out
    assert not list(tmp_path.glob("test_*.py"))


# -- the settings file, serve.json ------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_settings_file_gives_a_problem_and_the_defaults(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    if kind in ("deep", "deeper"):
        path.write_text("theme = " + "[" * DEEP + "]" * DEEP + "\n")
    else:
        _hostile(kind, path)
    config = load_config(path)
    assert config.problem and config.problem.endswith("using the defaults") and config.theme is None


@pytest.mark.parametrize("kind", KINDS)
def test_serve_json_that_is_not_one_means_no_server(kind: str, tmp_path: Path) -> None:
    _hostile(kind, tmp_path / SERVE_FILE)
    assert read_serve_info(tmp_path) is None


# -- the memory outbox and the Honcho fake's state --------------------------------------------------


@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_an_outbox_that_is_not_a_file_is_neither_read_nor_appended_to(kind: str, tmp_path: Path) -> None:
    stores = OutboxStores(tmp_path / "memory")
    stores.outbox_path.parent.mkdir(parents=True, exist_ok=True)
    _hostile(kind, stores.outbox_path)
    with pytest.raises(CorruptFileError, match="not a regular file"):
        stores.read_outbox()
    if kind == "dev-zero":  # appending to it would lose the capture without a word
        with pytest.raises(OutboxWriteError, match="not a regular file"):
            stores.append_lines([{"op": "delivered", "batchIds": ["b1"]}])  # type: ignore[list-item]


def test_an_outbox_line_nested_too_deep_is_a_corrupt_line(tmp_path: Path) -> None:
    stores = OutboxStores(tmp_path / "memory")
    stores.outbox_path.parent.mkdir(parents=True, exist_ok=True)
    stores.outbox_path.write_text('{"a":' * 200_000 + "1" + "}" * 200_000 + "\n" + _deep_json() + "\n")
    snapshot = stores.read_outbox()
    assert [c.number for c in snapshot.corrupt] == [1, 2]
    assert all("nested deeper than" in c.reason for c in snapshot.corrupt)


@pytest.mark.parametrize("kind", ["deeper", "dev-zero", "fifo"])
def test_outbox_state_files_are_bounded(kind: str, tmp_path: Path) -> None:
    stores = OutboxStores(tmp_path / "memory")
    ledger = stores.ledger_path("conv-1")
    ledger.parent.mkdir(parents=True, exist_ok=True)
    _hostile(kind, ledger)
    with pytest.raises(ServiceError):  # a link is refused as one; anything else as a corrupt ledger
        stores.read_ledger("conv-1")


@pytest.mark.parametrize("kind", ["deeper", "dev-zero", "fifo"])
def test_the_honcho_fakes_older_json_state_is_bounded(kind: str, tmp_path: Path) -> None:
    _hostile(kind, tmp_path / "honcho.json")
    with pytest.raises(FakeHonchoStateError, match="cannot be read"):
        open_store(tmp_path / "honcho.json")


# -- a repository's okf-base.json ---------------------------------------------------------------------


def test_a_repositorys_descriptor_nested_too_deep_is_refused() -> None:
    tree = {"okf-base.json": ('{"id": "proj", "x": ' + '{"a":' * 200_000 + "1" + "}" * 200_000 + "}").encode()}
    with pytest.raises(OkfConfigError, match="nested deeper"):
        descriptor_of("proj", "proj", tree, "the repository")

