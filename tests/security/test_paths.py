"""Every writer of a path whose parts come from outside, against every hostile name.

One table: each writer (a knowledge view, the judge's staged copy, directory delivery, the state
dir's runs and inputs, insight reviews, the outbox's ledgers, a recording's file) is handed ``..``,
an absolute name, a ``.git`` component, NUL, a name longer than a file system holds, a symlink
inside its base pointing out and a symlinked folder on the way. Each case is either refused with
an error naming the entry, or (where the writer never follows what is on its way) written inside;
in every case nothing lands outside the base and nothing the base held is lost or half written.

Then a real hostile Git repository (a ``..`` tree entry git accepts from a server that does not
fsck), bound as a base: its publication into a view and its staging for the judge are refused.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from services.errors import ServiceError
from services.knowledge.insights import InsightReviews
from services.knowledge.insights.proposal import Proposal
from services.knowledge.insights.reviews import InsightReview
from services.knowledge.okf import OkfError, OkfPathError
from services.knowledge.okf.bases import DirectoryBase
from services.knowledge.okf.delivery import DirectoryProvider
from services.knowledge.okf.home import publish_view
from services.knowledge.okf.limits import PathLimits, rel_path_problem
from services.knowledge.okf.tree import tree_digest
from services.knowledge.outbox.stores import OutboxStores
from services.record.recorder import RecordingError, start_recording
from tests.services.knowledge.okf.conftest import DECISION, SOUL, World, make_world
from tests.services.knowledge.okf.gitworld import bind_project, git, hermetic_git, make_git_world

LONG = "n" * 300 + ".md"
"""A name git holds and no common file system does (over 255 bytes)."""


def files_under(folder: Path) -> dict[str, bytes | str]:
    """Every entry under ``folder`` (links as their target, never followed); {} when it is missing."""
    found: dict[str, bytes | str] = {}
    if not os.path.lexists(folder):
        return found
    for top, dirs, names in os.walk(folder):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, folder)
            found[rel] = ("-> " + os.readlink(path)) if os.path.islink(path) else Path(path).read_bytes()
    return found


@dataclass
class Scene:
    """One writer's world: its base, a folder outside it, and what the writer needs."""

    base: Path
    outside: Path
    world: World | None = None
    extra: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Writer:
    """One writer of a path: how to make its scene and how to hand it a name."""

    name: str
    make: Callable[[Path], Awaitable[Scene]]
    write: Callable[[Scene, str], Awaitable[None]]
    refused: tuple[type[BaseException], ...]
    """What a refusal raises."""
    follows_nothing: tuple[str, ...] = ()
    """Link cases this writer meets by never following them (it writes inside), not by refusing."""
    not_named: tuple[str, ...] = ()
    """Lexical cases that cannot reach this writer, with the reason in ``NOT_REACHABLE``."""


# -- the writers -------------------------------------------------------------------------------------------


async def okf_scene(tmp: Path) -> Scene:
    world = await make_world(tmp)
    (world.notes / "decision.md").write_text(DECISION)
    await world.harvest.capture_now(world.source_id)  # a judged run: its staged copy exists
    outside = tmp / "outside"
    outside.mkdir()
    return Scene(world.base, outside, world)


async def view_scene(tmp: Path) -> Scene:
    scene = await okf_scene(tmp)
    assert scene.world is not None
    scene.base = scene.world.home / "knowledge-view-hostile"
    return scene


async def write_view(scene: Scene, name: str) -> None:
    """A view of the base whose tree (as a repository would give it) holds ``name``."""
    assert scene.world is not None
    base = DirectoryBase(scene.world.harvest.bindings.directory("team"))
    tree, _ = base.snapshot()
    tree = {**tree, name: b"hostile\n"}
    publish_view(scene.base, {"team": (base, tree, tree_digest(tree))}, SOUL, at=0.0)


async def staging_scene(tmp: Path) -> Scene:
    scene = await okf_scene(tmp)
    assert scene.world is not None
    runs = scene.world.harvest.runs
    [item] = await scene.world.harvest.queue()
    scene.extra["run"] = item.id
    scene.base = runs.work_dir(scene.world.source_id, item.id) / "bases" / "team"
    return scene


async def write_staging(scene: Scene, name: str) -> None:
    """The judge's staged copy of a base snapshot holding ``name``."""
    assert scene.world is not None
    runs, run_id = scene.world.harvest.runs, str(scene.extra["run"])
    tree, _ = DirectoryBase(scene.world.harvest.bindings.directory("team")).snapshot()
    if not name.startswith("<link"):
        tree = {**tree, name: b"hostile\n"}
    runs.stage(scene.world.source_id, run_id, at=0.0, snapshots={"team": (tree, tree_digest(tree), None)})


async def write_delivery(scene: Scene, name: str) -> None:
    """Directory delivery's one writer of a changed file."""
    assert scene.world is not None
    provider = scene.world.harvest.runs.provider("team")
    assert isinstance(provider, DirectoryProvider)
    with provider.base.locked():
        provider._replace(name, b"hostile\n")  # the single place a delivery writes a file


async def state_scene(tmp: Path) -> Scene:
    scene = await okf_scene(tmp)
    assert scene.world is not None
    scene.base = scene.world.harvest.state.runs_dir(scene.world.source_id)
    return scene


async def write_state(scene: Scene, name: str) -> None:
    """A run record whose id names its folder (and a judgment id from the control API or a recording)."""
    assert scene.world is not None
    state = scene.world.harvest.state
    with pytest.raises(OkfError):
        state.find_run(name)
    state.save_run(scene.world.source_id, {"id": name, "inputs": [], "status": "ready"})  # type: ignore[typeddict-item]


async def insight_scene(tmp: Path) -> Scene:
    reviews = InsightReviews(tmp / "knowledge", canvas=None)  # type: ignore[arg-type]  # no approval here
    outside = tmp / "outside"
    outside.mkdir()
    proposal = Proposal("A title", "user:ada", "principle", None, "private", "a capture", ("a truth",))
    review = await reviews.propose(proposal)
    return Scene(reviews.folder, outside, extra={"reviews": reviews, "review": review})


async def write_insight(scene: Scene, name: str) -> None:
    """A review decision written back under an id (from the control API or the record itself)."""
    reviews = scene.extra["reviews"]
    assert isinstance(reviews, InsightReviews)
    review = scene.extra["review"]
    assert isinstance(review, InsightReview)
    if name.endswith(".json"):
        name = name[: -len(".json")]
    with pytest.raises(ServiceError):
        await reviews.get(name)
    reviews._save(replace(review, id=name))  # the one place a review file is written


async def outbox_scene(tmp: Path) -> Scene:
    stores = OutboxStores(tmp / "memory")
    outside = tmp / "outside"
    outside.mkdir()
    return Scene(stores.state / "ledger", outside, extra={"stores": stores})


async def write_outbox(scene: Scene, name: str) -> None:
    """A ledger named by a conversation id (from a captured run)."""
    stores = scene.extra["stores"]
    assert isinstance(stores, OutboxStores)
    if name.endswith(".json"):
        name = name[: -len(".json")]
    stores.write_ledger({"conversationId": name})  # type: ignore[typeddict-item]


async def recording_scene(tmp: Path) -> Scene:
    base = tmp / "recordings"
    base.mkdir()
    outside = tmp / "outside"
    outside.mkdir()
    return Scene(base, outside)


async def write_recording(scene: Scene, name: str) -> None:
    """A recording started at ``base/name``."""
    await start_recording(scene.base / name, None)  # type: ignore[arg-type]  # refused before the workspace is used


async def write_judged(scene: Scene, name: str) -> None:
    """A judge's concept path: checked before a judgment is pending and again before a Git commit."""
    problem = rel_path_problem(name) or PathLimits().problem(name)  # as check_judgment and GitProvider check it
    if problem is not None:
        raise OkfPathError(problem)


WRITERS = [
    Writer("view publish", view_scene, write_view, (OkfPathError,), not_named=("link folder", "link file")),
    Writer("judge staging copy", staging_scene, write_staging, (OkfPathError,),
           follows_nothing=("link folder", "link file")),
    Writer("directory delivery", okf_scene, write_delivery, (OkfPathError,)),
    Writer("judged path (pending, Git commit)", okf_scene, write_judged, (OkfPathError,),
           not_named=("link folder", "link file")),
    Writer("state dir run record", state_scene, write_state, (OkfError,), follows_nothing=("link file",)),
    Writer("insight review", insight_scene, write_insight, (ServiceError,), not_named=("link folder",)),
    Writer("outbox ledger", outbox_scene, write_outbox, (ServiceError,), not_named=("link folder",)),
    Writer("recording file", recording_scene, write_recording, (RecordingError,),
           not_named=("dotdot", "absolute", "dotgit", "nul", "too long", "link folder")),
]

NOT_REACHABLE = {
    "view publish": "a view is a new folder built beside its target and renamed into place: nothing is on its way",
    "judged path (pending, Git commit)": "a judged path is text until delivery, whose writer is the delivery row",
    "insight review": "an id has no '/', so no folder is on its way",
    "outbox ledger": "an id has no '/', so no folder is on its way",
    "recording file": "the operator names the recording's path; only a link at it is a path from outside",
}

CASES = ["dotdot", "absolute", "dotgit", "nul", "too long", "link folder", "link file"]


def hostile_name(case: str, writer: Writer, scene: Scene) -> str:
    """The name handed to the writer (planting the link first for the link cases)."""
    if case == "dotdot":
        return "../escape.md" if writer.name in ("insight review", "outbox ledger") else "expert/../../escape.md"
    if case == "absolute":
        return str(scene.outside / "escape.md")
    if case == "dotgit":
        return ".git/config" if writer.name not in ("insight review", "outbox ledger") else ".git"
    if case == "nul":
        return "expert/a\x00b.md"
    if case == "too long":
        return LONG if writer.name not in ("insight review",) else "ir_" + "a" * 300
    scene.base.mkdir(parents=True, exist_ok=True)
    return PLANTS[writer.name](scene, case)


RUN = "00000000-0000-4000-8000-000000000000"


def link(at: Path, to: Path) -> None:
    os.symlink(to, at)


def plant_okf(scene: Scene, case: str) -> str:
    """A folder on the way is a link out (``ln/``), or the target itself is (``escape.md``)."""
    if case == "link folder":
        link(scene.base / "ln", scene.outside)
        return "ln/escape.md"
    link(scene.base / "escape.md", scene.outside / "escape.md")
    return "escape.md"


def plant_staging(scene: Scene, case: str) -> str:
    """The judge (whose cwd is ``work/``) left ``bases/`` as a link out, or a link inside the staged copy."""
    if case == "link folder":
        shutil.rmtree(scene.base.parent)
        link(scene.base.parent, scene.outside)
        return "<link folder>"
    link(scene.base / "escape.md", scene.outside / "escape.md")
    return "<link file>"


def plant_state(scene: Scene, case: str) -> str:
    """A run folder that is a link out, or a run's ``run.json`` that is."""
    if case == "link folder":
        link(scene.base / RUN, scene.outside)
        return RUN
    (scene.base / RUN).mkdir()
    link(scene.base / RUN / "run.json", scene.outside / "escape.md")
    return RUN


def plant_file(name: str) -> Callable[[Scene, str], str]:
    def plant(scene: Scene, case: str) -> str:
        link(scene.base / name, scene.outside / "escape.md")
        return name
    return plant


PLANTS: dict[str, Callable[[Scene, str], str]] = {
    "directory delivery": plant_okf, "judge staging copy": plant_staging, "state dir run record": plant_state,
    "insight review": plant_file("ir_link.json"), "outbox ledger": plant_file("conv-1.json"),
    "recording file": plant_file("run.jsonl"),
}


def entry_named(message: str, name: str) -> bool:
    """The refusal names the entry (the hostile part of it, as repr shows it)."""
    return any(part in message for part in (name[:40], repr(name)[1:40], "escape.md", ".git", "a\\x00b", "nnnn", "aaaa"))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("writer", WRITERS, ids=lambda w: w.name)
async def test_every_writer_keeps_every_hostile_name_inside_its_base(tmp_path: Path, writer: Writer,
                                                                     case: str) -> None:
    if case in writer.not_named:
        assert writer.name in NOT_REACHABLE, "every case a writer cannot meet says why"
        return
    scene = await writer.make(tmp_path)
    try:
        name = hostile_name(case, writer, scene)
        before = files_under(scene.base)
        accepted = files_under(scene.world.base) if scene.world is not None else {}
        notes = files_under(scene.world.notes) if scene.world is not None else {}
        outside_before = files_under(scene.outside)
        if case in writer.follows_nothing:
            await writer.write(scene, name)
        else:
            with pytest.raises(writer.refused) as refused:
                await writer.write(scene, name)
            assert entry_named(str(refused.value), name), str(refused.value)
            assert files_under(scene.base) == before, "a refused write changed its base"
        assert files_under(scene.outside) == outside_before, "a file landed outside the base"
        assert [p for p in tmp_path.rglob("*escape.md") if not p.is_symlink()] == [], "a file landed beside the base"
        if scene.world is not None:
            assert files_under(scene.world.base) == accepted, "the accepted base lost or gained a file"
            assert files_under(scene.world.notes) == notes, "a note was lost or changed"
    finally:
        if scene.world is not None:
            await scene.world.harvest.close()


# -- a real hostile repository ---------------------------------------------------------------------------


def push_hostile_commit(remote: Path, tmp: Path) -> str:
    """A commit on the remote's main whose ``knowledge/`` tree also holds ``.. / .. / pwned.md`` (made with
    plumbing: git's porcelain refuses such trees; a server with ``receive.fsckObjects=false`` keeps them)."""
    env = {**os.environ, "GIT_DIR": str(remote)}

    def plumb(*args: str, input: str | None = None) -> str:
        return subprocess.run(["git", *args], env=env, input=input, capture_output=True, text=True,
                              check=True).stdout.strip()

    git(remote, "config", "receive.fsckObjects", "false")
    git(remote, "config", "transfer.fsckObjects", "false")
    blob = plumb("hash-object", "-w", "--stdin", input="pwned\n")
    inner = plumb("mktree", input=f"100644 blob {blob}\tpwned.md\n")
    dotdot = plumb("mktree", input=f"040000 tree {inner}\t..\n")
    head = plumb("rev-parse", "refs/heads/main")
    listing = plumb("ls-tree", f"{head}:knowledge")
    knowledge = plumb("mktree", input=listing + f"\n040000 tree {dotdot}\t..\n")
    top = [line for line in plumb("ls-tree", head).splitlines() if not line.endswith("\tknowledge")]
    root = plumb("mktree", input="\n".join(top + [f"040000 tree {knowledge}\tknowledge"]) + "\n")
    commit = plumb("commit-tree", root, "-p", head, "-m", "a tree with a .. entry")
    plumb("update-ref", "refs/heads/main", commit)
    assert "knowledge/../../pwned.md" in plumb("ls-tree", "-r", "--full-tree", commit, "--", "knowledge")
    return commit


async def test_a_repository_with_a_dotdot_entry_is_refused_for_views_and_staging(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from services.changes import ChangeFeed
    from services.clock import FakeClock
    from services.knowledge.okf import Harvest, LocalJudgeClient

    hermetic_git(monkeypatch, tmp_path)
    (tmp_path / "git").mkdir()
    world = make_git_world(tmp_path / "git")
    harvest = await Harvest.open(tmp_path / "ws" / "knowledge", ChangeFeed(), LocalJudgeClient(), clock=FakeClock())
    try:
        await bind_project(harvest, world)  # bound while its accepted branch was sound
        home = tmp_path / "ws" / "homes" / "expert"
        from tests.services.knowledge.okf.gitworld import SOUL as GIT_SOUL

        source_id = await harvest.register_home(home, GIT_SOUL, agent="expert")
        views_before = sorted(p.name for p in home.iterdir())
        push_hostile_commit(world.remote, tmp_path)

        with pytest.raises(OkfPathError, match=r"'\.\./\.\./pwned\.md'.*nothing of it is written") as refused:
            await harvest.refresh(source_id)  # publication of a view
        assert refused.value.remedy and "remove the entry" in refused.value.remedy
        assert sorted(p.name for p in home.iterdir()) == views_before, "a view (or a half view) was left"

        (home / "notes" / "decision.md").write_text(DECISION)
        with pytest.raises(OkfPathError, match=r"'\.\./\.\./pwned\.md'.*nothing of it is written"):
            await harvest.capture_now(source_id)  # staging for the judge reads the hostile head
        assert await harvest.queue() == [], "no run is left half staged"
        status = harvest.state.status(source_id)
        assert harvest.runs.outstanding(source_id) == status["captured"]["inputs"] != [], \
            "the captured note stays outstanding for a judgment once the branch is sound again"

        landed = [p for p in tmp_path.rglob("pwned.md")]
        assert landed == [], f"the hostile entry was written: {landed}"
        with pytest.raises(OkfPathError, match=r"\.\./\.\./pwned\.md"):
            harvest.runs.snapshots(["project"])  # what staging reads, refused before any file is written
    finally:
        await harvest.close()


async def test_a_repository_with_a_dotdot_entry_cannot_be_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from services.changes import ChangeFeed
    from services.clock import FakeClock
    from services.knowledge.okf import Harvest, LocalJudgeClient

    hermetic_git(monkeypatch, tmp_path)
    (tmp_path / "git").mkdir()
    world = make_git_world(tmp_path / "git")
    push_hostile_commit(world.remote, tmp_path)
    harvest = await Harvest.open(tmp_path / "ws" / "knowledge", ChangeFeed(), LocalJudgeClient(), clock=FakeClock())
    try:
        with pytest.raises(OkfPathError, match=r"'\.\./\.\./pwned\.md'"):
            await bind_project(harvest, world)
        assert "project" not in harvest.bindings.bases
        assert [p for p in tmp_path.rglob("pwned.md")] == []
    finally:
        await harvest.close()
