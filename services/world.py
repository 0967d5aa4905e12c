"""The sample world a new workspace starts with, read from ``assets/sample/world.json``.

It gives every pane something to show on first launch: people with grants in different states,
providers (one failed to install), and runs at different points of their life (idle after a
reply, waiting on a question, a failed turn with a pending message, a child node's turn).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cloud import FakeCloud
from .errors import ServiceError
from .files import CorruptFileError, read_json

if TYPE_CHECKING:
    from .canvas import Canvas
    from .canvas.service import DocumentItem
    from .knowledge.insights import InsightReviews
    from .knowledge.okf import Harvest
    from .sdk import ConnectionStore

__all__ = ["WorldError", "load_world", "seed_cloud", "seed_canvas", "seed_insights", "seed_knowledge"]


class WorldError(ServiceError):
    """The sample world file is missing a field or has one of the wrong shape."""


def load_world(path: Path) -> dict[str, Any]:
    """The world description, with a clear error when it is not valid JSON."""
    try:
        world = read_json(Path(path))  # a regular file, size and depth bounded
    except (OSError, CorruptFileError) as exc:
        raise WorldError(f"{path}: cannot read the sample world ({exc})") from None
    if not isinstance(world, dict) or not isinstance(world.get("users"), list):
        raise WorldError(f"{path}: the sample world needs a list of users")
    return world


async def seed_cloud(cloud: FakeCloud, world: dict[str, Any], store: ConnectionStore) -> None:
    """Create the world's people, providers and runs on ``cloud``; connections go to ``store``."""
    for spec in world.get("providers", []):
        cloud.providers.define(
            spec["name"],
            tools={name: {"group": tool.get("group", name)} for name, tool in spec.get("tools", {}).items()},
            status=spec.get("status", "ready"),
            error=spec.get("error"),
        )
    for spec in world["users"]:
        try:
            user_id = spec["id"]
        except KeyError:
            raise WorldError("every sample user needs an id") from None
        await cloud.connect(store, user_id, scopes=spec.get("scopes"), dependencies=spec.get("dependencies"))
        user = cloud.user(user_id)
        if spec.get("spend_cap"):
            user.grant.set(spend_cap=spec["spend_cap"])
        for doc in spec.get("memory", []):
            user.memory.put(doc["name"], doc["body"], kind=doc.get("kind", "knowledge"), privacy=doc.get("privacy", "public"))
    # An in-memory cloud is seeded again on every launch over a canvas that is kept: the same world
    # must make the same message ids, so nothing it filed last time is filed twice.
    salt = hashlib.sha256(json.dumps(world.get("runs", []), sort_keys=True, default=str).encode()).hexdigest()
    with cloud.replayable_ids(f"world:{salt}"):
        for spec in world.get("runs", []):
            await _seed_run(cloud, spec)
        await cloud.settle_tasks()


async def _seed_run(cloud: FakeCloud, spec: dict[str, Any]) -> None:
    client = cloud.crouter(spec["user"])
    try:
        options = {"id": spec["id"]} if spec.get("id") else {}
        run = await client.runs.start(prompt=spec["prompt"], name=spec.get("name"), **options)
        fake = cloud.runs.get(run.id)
        for step in spec.get("script", []):
            if "reply" in step:
                fake.reply(step["reply"])
            elif "message" in step:
                await client.runs.message(run.id, step["message"], start_turn=step.get("start_turn", False))
            elif "ask" in step:
                fake.ask(title=step["ask"])
            elif "fail_turn" in step:
                fake.fail_turn(**step["fail_turn"])
            elif "settle" in step:
                fake.settle(step["settle"])
            elif "emit" in step:
                emit = step["emit"]
                fake.emit(emit["type"], emit.get("fields", {}), node_id=emit.get("node_id"))
            else:
                raise WorldError(f"unknown sample run step {sorted(step)}")
    finally:
        await client.aclose()


async def seed_canvas(canvas: Canvas, world: dict[str, Any]) -> bool:
    """Create the world's owners, documents, listeners and node messages, unless the canvas holds them.

    A team's canvas (PostgreSQL) is shared by many workspaces, each new one seeded with the same
    world: the first document is the claim. The workspace whose write of it succeeds seeds the rest
    (documents or listeners someone wrote meanwhile are kept as they are); one that finds it taken
    (``NameTakenError``, decided by the database even when several open at once) seeds nothing, so
    no document is written twice and no node gets the world's messages twice. True when it seeded.
    """
    from .canvas import NameTakenError

    spec = world.get("canvas", {})
    for owner in spec.get("owners", []):
        await canvas.ensure_owner(owner["type"], owner["handle"])
    documents: list[DocumentItem] = [{"name": doc["name"], "preview": doc["preview"], "body": doc.get("body", ""), "owner": doc["owner"],
                  "kind": doc.get("kind", "knowledge"), "privacy": doc.get("privacy", "public")}
                 for doc in spec.get("documents", [])]
    try:  # a fresh canvas takes the world's documents in one transaction
        await canvas.write_many(documents)
    except NameTakenError:  # some are there already: one at a time, the first one deciding the claim
        for index, doc in enumerate(documents):
            try:
                await canvas.write(**doc)
            except NameTakenError:
                if index == 0:  # the canvas already holds a world
                    return False
    for listener in spec.get("listeners", []):
        try:
            await canvas.create_listener(listener["topic"], owner=listener["owner"], domain=listener["domain"])
        except NameTakenError:
            pass
    for message in spec.get("messages", []):
        await canvas.message_send(message["body"], to=message["to"], sender=message.get("sender"))
    return True


async def seed_insights(reviews: InsightReviews, world: dict[str, Any]) -> None:
    """Queue the world's insight proposals for review."""
    for markdown in world.get("insights", []):
        await reviews.submit_markdown(markdown, proposer="sample world")


async def seed_knowledge(harvest: Harvest, world: dict[str, Any], *, homes: Path, bases: Path) -> str | None:
    """Create the world's accepted base and agent home, write its notes and capture them; the source id."""
    from .knowledge.okf import SoulDecl

    spec = world.get("knowledge")
    if not spec:
        return None
    base = spec["base"]
    # an open that failed after binding the base (or registering the home) is retried: keep what it made
    if base["alias"] not in harvest.bindings.bases:
        await harvest.init_base(base["alias"], base["nodes"], base_id=base.get("id"), path=bases / base["alias"])
    if spec.get("git"):
        await seed_git_base(harvest, spec["git"], bases=bases)
    home_spec = spec["home"]
    home = homes / home_spec["agent"]
    soul = SoulDecl(home_spec["owner"], tuple(home_spec["owns"]), tuple(home_spec.get("reads", ())))
    known = [s.id for s in await harvest.sources() if Path(s.home).resolve() == home.resolve()]
    source_id = known[0] if known else await harvest.register_home(home, soul, agent=home_spec["agent"])
    notes = home / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    for name, text in spec.get("notes", {}).items():
        (notes / name).write_text(text, encoding="utf-8")
    await harvest.capture_now(source_id)
    return source_id


async def seed_git_base(harvest: Harvest, spec: dict[str, Any], *, bases: Path) -> None:
    """The world's Git base: a bare repository ``<bases>/<alias>.git`` whose accepted branch already holds
    the base at its root (as a team's repository would), bound as the second binding. Skipped without git."""
    import asyncio

    from .knowledge.okf.bases import new_base_tree
    from .knowledge.okf.git import git_available, seed_repository

    if not git_available() or spec["alias"] in harvest.bindings.bases:  # no git, or bound by an earlier open
        return
    at = harvest.clock.time()
    _, tree = new_base_tree(spec["id"], spec["nodes"], at=at)
    root = spec["root"].strip("/")
    files = {(f"{root}/{rel}" if root not in ("", ".") else rel): data for rel, data in tree.items()}
    files["README.md"] = b"# project\n\nThe project's repository; its reviewed knowledge lives under knowledge/.\n"
    repository = bases / f"{spec['alias']}.git"
    await asyncio.to_thread(seed_repository, repository, files, branch=spec["acceptedBranch"],
                            message="Add the knowledge base", at=at)
    await harvest.bind_git_base(spec["alias"], repository=str(repository), root=spec["root"],
                                accepted_branch=spec["acceptedBranch"], pr_repository=spec["pr"]["repository"],
                                base_id=spec["id"])
