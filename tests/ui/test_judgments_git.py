"""The judgments pane for a Git base (the sample world's second binding): branch, waiting, accepted at a head."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from services.knowledge.okf import SoulDecl
from tests.services.knowledge.okf.gitworld import DECISION, git, hermetic_git
from tests.ui.conftest import ready, settle

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def pane_text(app: Any) -> str:
    return str(app.main.query_one("#judgment-text").render())


async def test_a_git_judgment_shows_its_branch_waits_for_the_merge_and_j_finds_it_accepted(
        app: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hermetic_git(monkeypatch, tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path / 'nogh'}:{__import__('os').environ['PATH']}")
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        assert list(ws.okf.bindings.bases) == ["team", "project"]
        assert ws.okf.bindings.bases["project"].kind == "git"
        remote = ws.bases_path() / "project.git"
        main_before = git(remote, "rev-parse", "refs/heads/main")
        home = tmp_path / "steward-home"
        source_id = await ws.okf.register_home(home, SoulDecl("steward-id", ("project/steward",), ()), agent="steward")
        (home / "notes" / "retries.md").write_text(DECISION)
        await ws.okf.capture_now(source_id)
        [item] = [i for i in await ws.okf.queue(["pending"]) if i.source_id == source_id]
        await pilot.press("5")
        await settle(pilot)
        pane = app.main.pane("judgments")
        pane.select_key(f"okf:{item.id}")
        await settle(pilot)
        pane.focus_main()
        await pilot.press("y")
        await settle(pilot)
        await pilot.press("y")  # the whole judgment: confirmed
        await settle(pilot, 6)
        branch = f"okf/{item.id}-project-knowledge"
        assert git(remote, "for-each-ref", "--format=%(refname:short)", "refs/heads/okf/") == branch
        assert git(remote, "rev-parse", "refs/heads/main") == main_before
        [delivered] = [i for i in await ws.okf.queue() if i.id == item.id]
        assert delivered.state == "delivered"
        text = pane_text(app)
        assert branch in text and "waiting for the merge" in text and "github.com/example/project/compare" in text
        app.save_screenshot(filename="git-waiting.svg", path=str(tmp_path))

        reviewer = tmp_path / "reviewer"
        git(tmp_path, "clone", "--quiet", str(remote), str(reviewer))
        git(reviewer, "merge", "--quiet", "--no-ff", "-m", "Merge the steward's decision", f"origin/{branch}")
        git(reviewer, "push", "--quiet", "origin", "main")
        head = git(reviewer, "rev-parse", "HEAD")
        await pilot.press("j")
        await settle(pilot, 6)
        [accepted] = [i for i in await ws.okf.queue() if i.id == item.id]
        assert accepted.state == "approved" and accepted.git[0].accepted_commit == head
        text = pane_text(app)
        assert f"accepted at head {head}" in text
        app.save_screenshot(filename="git-accepted.svg", path=str(tmp_path))


async def test_o_opens_the_pull_request_only_after_asking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from screens.dialogs import ConfirmDialog
    from services.clock import FakeClock
    from services.workspace import Settings
    from tests.services.knowledge.okf.gitworld import stand_in_gh
    from tests.ui.test_document_links import RecordingApp

    hermetic_git(monkeypatch, tmp_path)
    stand_in_gh(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{__import__('os').environ['PATH']}")
    app = RecordingApp(settings=Settings(path=tmp_path / "ws", clock=FakeClock()))
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        home = tmp_path / "steward-home"
        source_id = await ws.okf.register_home(home, SoulDecl("steward-id", ("project/steward",), ()), agent="steward")
        (home / "notes" / "retries.md").write_text(DECISION)
        await ws.okf.capture_now(source_id)
        [item] = [i for i in await ws.okf.queue(["pending"]) if i.source_id == source_id]
        await ws.okf.approve(item.id)
        await pilot.press("5")
        await settle(pilot)
        pane = app.main.pane("judgments")
        pane.select_key(f"okf:{item.id}")
        await settle(pilot)
        url = "https://github.com/example/project/pull/1"
        assert url in pane_text(app) and "o opens it (asks first)" in pane_text(app)
        pane.focus_main()
        await pilot.press("o")
        await asking(pilot)  # the worker waits on the dialog: wait for the dialog, not for the worker
        assert isinstance(app.screen, ConfirmDialog) and app.opened == []
        assert url in str(app.screen.query_one(".dialog-title").render())
        await pilot.press("n")
        await settle(pilot)
        assert app.opened == [] and not isinstance(app.screen, ConfirmDialog)
        await pilot.press("o")
        await asking(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert app.opened == [url]


async def asking(pilot: Any) -> None:
    from screens.dialogs import ConfirmDialog

    for _ in range(100):
        await pilot.pause()
        if isinstance(pilot.app.screen, ConfirmDialog):
            return
    raise AssertionError("no dialog asked")
