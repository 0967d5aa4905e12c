"""Every place that shows or stores a URL, against a token in it.

A Git base is bound as ``https://okf-bot:TOKEN@git.example.test/project.git`` (the operator's git
config rewrites that address to a real local repository, so every git command works); a judgment
is captured, judged, approved, pushed and merged. Each row collects what one place holds: the
bindings file, every file under the knowledge root, the change events, the desk's read models,
error texts (a fetch that fails, a push the remote refuses, a bindings file refused, git's own
words), the memory destination the header shows, the canvas URL in messages and the header, a url
receiver's refusal. The token appears in none of them; the URL still works for git.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest

from services.canvas.engine import canvas_label, display_url
from services.canvas.errors import DocumentInvalidError
from services.canvas.receivers import check_receiver
from services.changes import Change, ChangeFeed
from services.clock import FakeClock
from services.knowledge.okf import Harvest, LocalJudgeClient, OkfError, parse_bindings
from services.knowledge.okf.git import run_git
from services.knowledge.okf.git_urls import credential_config
from services.knowledge.outbox import MemoryOutbox
from services.open_errors import canvas_location
from tests.services.knowledge.okf.gitworld import DECISION, SOUL, git, hermetic_git, make_git_world

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

TOKEN = "tok3n-5ecret-a1b2c3d4e5f6"
PUBLIC = "https://git.example.test/project.git"
WITH_TOKEN = f"https://okf-bot:{TOKEN}@git.example.test/project.git"


class RecordingFeed(ChangeFeed):
    """The real change feed, keeping every change published."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Change] = []

    def publish(self, change: Change) -> None:
        self.seen.append(change)
        super().publish(change)

    def publish_many(self, changes: Sequence[Change]) -> None:
        self.seen.extend(changes)
        super().publish_many(changes)


async def flow(tmp: Path, *, refuse_push: bool = False) -> tuple[Harvest, RecordingFeed, str, list[str]]:
    """Bind with the token, register a home, capture and judge a note, approve it; texts of the errors."""
    (tmp / "world").mkdir()
    world = make_git_world(tmp / "world")
    git(tmp, "config", "--global", f"url.{world.remote}.insteadOf", PUBLIC)
    feed = RecordingFeed()
    harvest = await Harvest.open(tmp / "knowledge", feed, LocalJudgeClient(), clock=FakeClock())
    await harvest.bind_git_base("project", repository=WITH_TOKEN, root="knowledge", accepted_branch="main",
                                pr_repository=f"https://x-access-token:{TOKEN}@github.com/example/project",
                                base_id="project-knowledge")
    home = tmp / "homes" / "expert"
    source_id = await harvest.register_home(home, SOUL, agent="expert")
    (home / "notes" / "retries.md").write_text(DECISION)
    await harvest.capture_now(source_id)
    [item] = await harvest.queue(["pending"])
    errors: list[str] = []
    if refuse_push:
        world.refuse_pushes(f"refused for {WITH_TOKEN}")
        with pytest.raises(OkfError) as caught:
            await harvest.approve(item.id)
        errors += [str(caught.value), caught.value.remedy or ""]
    else:
        assert (await harvest.approve(item.id)).state == "delivered"  # the URL worked: fetched and pushed
        branch = harvest.state.load_run(source_id, item.id)["receipts"]["project"]["branch"]
        assert branch in world.okf_branches()
        world.review(branch, "merge")
        [done] = await harvest.recheck()
        assert done.state == "approved"
    return harvest, feed, source_id, errors


def _files(root: Path) -> list[str]:
    return [p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


async def bindings_file(tmp: Path) -> list[str]:
    harvest, *_ = await flow(tmp)
    await harvest.close()
    return [(tmp / "knowledge" / "okf-bindings.json").read_text(), repr(harvest.bindings)]


async def knowledge_files(tmp: Path) -> list[str]:
    harvest, *_ = await flow(tmp)
    await harvest.close()
    return _files(tmp / "knowledge") + _files(tmp / "homes")


async def change_events(tmp: Path) -> list[str]:
    harvest, feed, *_ = await flow(tmp)
    await harvest.close()
    return [repr(change) for change in feed.seen]


async def read_models(tmp: Path) -> list[str]:
    harvest, _, source_id, _ = await flow(tmp)
    queue = await harvest.queue()
    texts = [repr(queue), repr(await harvest.detail(queue[0].id)), repr(await harvest.notices()),
             repr(await harvest.sources()), repr(await harvest.inspect(source_id))]
    await harvest.close()
    return texts


async def refused_push(tmp: Path) -> list[str]:
    harvest, feed, source_id, errors = await flow(tmp, refuse_push=True)
    queue = await harvest.queue()
    await harvest.close()
    return errors + [repr(queue), *map(repr, feed.seen), *_files(tmp / "knowledge")]


async def failed_fetch(tmp: Path) -> list[str]:
    harvest = await Harvest.open(tmp / "knowledge", ChangeFeed(), LocalJudgeClient(), clock=FakeClock())
    with pytest.raises(OkfError) as caught:
        await harvest.bind_git_base("gone", repository=f"https://u:{TOKEN}@unreachable.invalid/x.git",
                                    root="knowledge", accepted_branch="main", pr_repository="example/project")
    await harvest.close()
    exc = caught.value
    return [str(exc), getattr(exc, "output", ""), exc.remedy or "", *_files(tmp / "knowledge")]


async def refused_bindings(tmp: Path) -> list[str]:
    texts = []
    for repository in (f"ext::https://u:{TOKEN}@h/x", f"git://u:{TOKEN}@h/x", f"-https://u:{TOKEN}@h/x"):
        doc = {"version": 1, "stateDir": "state", "bases": {"p": {
            "id": "p", "kind": "git", "repository": repository, "root": "knowledge", "acceptedBranch": "main",
            "pr": {"repository": "example/project"}}}}
        with pytest.raises(OkfError) as caught:
            parse_bindings(doc, tmp / "okf-bindings.json", check_paths=False)
        texts.append(str(caught.value))
    return texts


async def git_words(tmp: Path) -> list[str]:
    with pytest.raises(OkfError) as caught:
        run_git(["ls-remote", "--", f"https://u:{TOKEN}@unreachable.invalid/x.git"], what="git ls-remote")
    return [str(caught.value), getattr(caught.value, "output", "")]


async def memory_destination(tmp: Path) -> list[str]:
    outbox = await MemoryOutbox.open(tmp / "memory", ChangeFeed(), base_url=f"https://app:{TOKEN}@honcho.example.test",
                                     api_key="key", clock=FakeClock())
    try:
        return [outbox.destination]
    finally:
        await outbox.aclose()


async def canvas_url(tmp: Path) -> list[str]:
    url = f"postgresql+psycopg://workbench:{TOKEN}@db.example.test:5432/canvas"
    return [display_url(url), canvas_label(url), str(canvas_location(url, tmp))]


async def receiver_refusal(tmp: Path) -> list[str]:
    texts = []
    for url in (f"http://hook:{TOKEN}@example.test/in", f"ftp://hook:{TOKEN}@example.test/in"):
        with pytest.raises(DocumentInvalidError) as caught:
            check_receiver("url", url=url)
        texts.append(str(caught.value))
    return texts


PLACES: list[tuple[str, Callable[[Path], Awaitable[list[str]]]]] = [
    ("the bindings file", bindings_file),
    ("every file under the knowledge root (frozen descriptors, runs, receipts, status, proposals, cache)",
     knowledge_files),
    ("change events", change_events),
    ("desk read models (queue rows, detail, notices, sources, inspect)", read_models),
    ("a push the remote refuses: error, failed judgment, events, files", refused_push),
    ("a fetch that fails at binding: error text", failed_fetch),
    ("a bindings file refused: error text", refused_bindings),
    ("git's own words", git_words),
    ("the memory destination the header shows", memory_destination),
    ("the canvas URL in messages and the header", canvas_url),
    ("a url receiver's refusal", receiver_refusal),
]


@pytest.mark.parametrize("name,place", PLACES, ids=[p[0] for p in PLACES])
async def test_a_token_in_a_url_is_never_shown_nor_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                                                          place: Callable[[Path], Awaitable[list[str]]]) -> None:
    hermetic_git(monkeypatch, tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path / 'nogh'}:{os.environ['PATH']}")
    texts = await place(tmp_path)
    assert texts and any(t for t in texts)
    leaks = [t for t in texts if TOKEN in t]
    assert not leaks, f"{name}: the token shows in {leaks[0][:400]!r}"


async def test_credentials_given_in_the_url_reach_git_through_its_credential_protocol(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The token is kept in memory and answered to git's credential request; it is on no command line."""
    hermetic_git(monkeypatch, tmp_path)
    harvest, *_ = await flow(tmp_path)
    await harvest.close()
    assert harvest.bindings.bases["project"].repository == PUBLIC
    config, env = credential_config(PUBLIC)
    assert TOKEN not in " ".join(config)
    answer = run_git(["credential", "fill"], input=b"protocol=https\nhost=git.example.test\npath=project.git\n\n",
                     config=config, env=env).stdout.decode()
    assert "username=okf-bot" in answer and f"password={TOKEN}" in answer
