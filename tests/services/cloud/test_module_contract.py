"""The fake cloud's modules share one explicit state object (``services.cloud.shared.CloudState``)
and never reach into another object's private names: checked over the source with ``ast``."""

from __future__ import annotations

import ast
from pathlib import Path

from services.cloud import FakeCloud
from services.cloud.state import export_state, import_state
from services.sdk import MemoryConnectionStore

SERVICES = Path(__file__).resolve().parents[3] / "services"
CLOUD = SERVICES / "cloud"
SERVED = SERVICES / "served"
OWN = frozenset({"self", "cls"})
BY_NAME = frozenset({"getattr", "setattr", "hasattr", "delattr"})


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_reaches(source: str, filename: str) -> list[str]:
    """Every read or write of an underscore name of anything but ``self``/``cls``, as ``file:line what``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in OWN):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BY_NAME:
            args = node.args
            if (len(args) >= 2 and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str)
                    and _private(args[1].value)
                    and not (isinstance(args[0], ast.Name) and args[0].id in OWN)):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.extend((node.lineno, f"from {'.' * node.level}{node.module or ''} import {alias.name}")
                         for alias in node.names if _private(alias.name))
    return [f"{filename}:{line} {what}" for line, what in sorted(found)]


def test_no_cloud_module_reaches_into_another_objects_private_names() -> None:
    offences = []
    for path in sorted([*CLOUD.glob("*.py"), *SERVED.glob("*.py")]):  # the served runtime uses the fake's public face too
        name = str(path.relative_to(SERVICES.parent))
        offences += private_reaches(path.read_text(encoding="utf-8"), name)
    assert not offences, "the cloud's parts share cloud.state and public methods instead of:\n" + "\n".join(offences)


def test_the_contract_names_each_private_reach_by_file_and_line() -> None:
    source = "\n".join([
        "def f(self, cloud, other):",
        "    self._fine = cloud.state.users",  # own names and public ones pass
        "    cloud._users[1] = 2",  # a write
        "    return other.grant._dto, getattr(cloud, '_run_log'), cloud.__class__",  # reads; a dunder passes
        "from .runtime import _Keyed",
    ])
    assert private_reaches(source, "services/cloud/x.py") == [
        "services/cloud/x.py:3 cloud._users",
        "services/cloud/x.py:4 getattr(cloud, '_run_log')",
        "services/cloud/x.py:4 other.grant._dto",
        "services/cloud/x.py:5 from .runtime import _Keyed",
    ]


async def test_every_part_sees_the_one_state_object_across_an_import() -> None:
    source = FakeCloud("app")
    await source.connect(MemoryConnectionStore(), "user:o1")
    target = FakeCloud("app")
    state = target.state
    import_state(target, export_state(source))
    assert target.state is state  # replaced in place: the parts holding it see the imported state
    assert target.transport.state is state and target.transport.ops.state is state
    assert target.transport.directory.state is state
    assert target.people == ["user:o1"] and state.key.kid == source.state.key.kid
    token, _ = source.state.mint_access(source.user("user:o1"))
    async with target.crouter("user:o1") as client:
        assert (await client.grant.get())["state"] == "active"
    assert state.key.claims_of(token) is not None  # the imported key verifies what the source signed


async def test_an_imported_document_is_copied_unless_the_caller_hands_it_over() -> None:
    source = FakeCloud("app")
    await source.connect(MemoryConnectionStore(), "user:o1")
    run = await source.crouter("user:o1").runs.start(prompt="first")
    source.runs.get(run.id).emit("custom.note", {"text": "kept"})
    doc = export_state(source)
    copied = FakeCloud("app")
    import_state(copied, doc)
    doc["runs"][0]["params"]["prompt"] = "changed after the import"
    doc["runs"][0]["events"][-1]["text"] = "changed too"
    imported = copied.runs.get(run.id)
    assert imported.params["prompt"] == "first" and imported.events[-1]["text"] == "kept"  # the caller's doc is its own

    handed = export_state(source)
    owned = FakeCloud("app")
    import_state(owned, handed, owned=True)  # a store's read: nobody else holds it, its values are taken as they are
    assert owned.runs.get(run.id).params is handed["runs"][0]["params"]
    assert [e["seq"] for e in owned.runs.get(run.id).events] == [e["seq"] for e in source.runs.get(run.id).events]


def test_json_clean_finds_every_string_repair_would_change_in_one_scan() -> None:
    from services.text import json_clean, repair_value

    for value in ({"a": ["x", {"b": "fine é 😀"}]}, [], "a \\ backslash", {"k": 1.5, "n": None}):
        assert json_clean(value) and repair_value(value) == (value, False)
    assert repair_value("\\u0000 written as text")[1] is False  # json_clean may send it to the walk: nothing changes
    for value in ({"a": "nul \x00 in it"}, ["lone \ud800 surrogate"], {"key \udc00": 1}, [[["deep \x00"]]]):
        assert not json_clean(value) and repair_value(value)[1]
    assert not json_clean({"not json": object()})  # walked instead
