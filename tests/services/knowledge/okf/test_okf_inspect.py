"""Inspection: labelled documents, live-memory reasons, and the 256 KiB preview cap."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from services.knowledge.okf import PREVIEW_CAP, preview_file

from .conftest import DECISION, World


async def test_live_home_documents_in_order(world: World) -> None:
    (world.notes / "b.md").write_text(DECISION)
    (world.notes / "a").mkdir()
    (world.notes / "a" / "nested.md").write_text("nested\n")
    report = await world.harvest.inspect(world.source_id)
    assert report["liveMemory"]["available"] is True and report["liveMemory"]["reason"] == "live"
    labels = [d["label"] for d in report["documents"]]
    assert labels == ["Working state (STATE.md)", "Log (log.md)", "Pending note: a/nested.md", "Pending note: b.md",
                      "Durable processing receipts"]
    assert report["documents"][0]["text"] == "# Working state\n\n# Task\n\n# Next\n"
    assert report["owns"] == ["team/expert"] and report["reads"] == ["team/ops"]
    assert report["acceptedView"]["bases"]["team"]["digest"].startswith("sha256-")
    assert all("truncated" not in d for d in report["documents"])


async def test_missing_home_keeps_durable_inspection(world: World) -> None:
    shutil.rmtree(world.home)
    report = await world.harvest.inspect(world.source_id)
    assert report["liveMemory"] == {"available": False, "reason": "missing-home", "observedAt": report["liveMemory"]["observedAt"]}
    assert [d["label"] for d in report["documents"]] == ["Durable processing receipts"]


async def test_unsafe_home_withholds_live_memory(world: World) -> None:
    (world.root / "elsewhere.md").write_text("x")
    os.symlink(world.root / "elsewhere.md", world.notes / "link.md")
    report = await world.harvest.inspect(world.source_id)
    assert report["liveMemory"]["reason"] == "unverified-home" and "symlink" in report["liveMemory"]["error"]
    assert [d["label"] for d in report["documents"]] == ["Durable processing receipts"]


async def test_relabelled_home_is_an_identity_mismatch(world: World) -> None:
    (world.home / ".okf-source.json").write_text('{"version": 1, "id": "someone-else", "source": "/x"}')
    report = await world.harvest.inspect(world.source_id)
    assert report["liveMemory"]["reason"] == "identity-mismatch"


@pytest.mark.parametrize("size, truncated", [(PREVIEW_CAP - 1, False), (PREVIEW_CAP, False), (PREVIEW_CAP + 1, True)])
def test_preview_cap_boundaries(tmp_path: Path, size: int, truncated: bool) -> None:
    path = tmp_path / "doc.md"
    path.write_bytes(b"a" * size)
    preview = preview_file(path)
    assert preview.get("truncated", False) is truncated
    if truncated:
        assert preview["bytes"] == size and len(preview["text"]) == PREVIEW_CAP
    else:
        assert preview["text"] == "a" * size


def test_multibyte_character_straddling_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    path.write_bytes(b"a" * (PREVIEW_CAP - 1) + "é".encode() + b"tail")
    preview = preview_file(path)
    assert preview["truncated"] and preview["text"] == "a" * (PREVIEW_CAP - 1)
    assert "\ufffd" not in preview["text"]


def test_invalid_utf8_becomes_replacement_characters(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    path.write_bytes(b"ok \xff\xfe end")
    assert preview_file(path)["text"] == "ok \ufffd\ufffd end"


def test_huge_sparse_file_reads_only_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "sparse.md"
    with open(path, "wb") as handle:
        handle.truncate(5 * 1024**3)
    preview = preview_file(path)
    assert preview["truncated"] and preview["bytes"] == 5 * 1024**3 and len(preview["text"]) == PREVIEW_CAP


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.md")
    with pytest.raises(Exception, match="not a plain regular file"):
        preview_file(tmp_path / "pipe.md")


async def test_large_note_is_previewed_with_its_size(world: World) -> None:
    (world.notes / "big.md").write_bytes(b"x" * (PREVIEW_CAP + 10))
    report = await world.harvest.inspect(world.source_id)
    [doc] = [d for d in report["documents"] if d["label"] == "Pending note: big.md"]
    assert doc["truncated"] is True and doc["bytes"] == PREVIEW_CAP + 10 and len(doc["text"]) == PREVIEW_CAP
    assert (world.notes / "big.md").stat().st_size == PREVIEW_CAP + 10  # inspection is read-only
