"""Inspection: a read-only report of a source, its receipts and its live memory, with a preview cap.

The report is OKF's ``{summary, source, owns, reads, bases, authority, acceptedView, status,
scheduler, liveMemory, documents}``. For a live home whose marker names this source, documents
are ``Working state (STATE.md)``, ``Log (log.md)``, sorted ``Pending note: <name>`` (nested
included), then ``Durable processing receipts``. A missing, retired, relabelled or unsafe home
yields only the durable document and says why in ``liveMemory.reason``. Every document is capped
at 256 KiB: larger ones report ``truncated: true`` and their original ``bytes``; the read never
takes more than the cap plus one byte, and a UTF-8 character cut by the cap is dropped whole.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from ...clock import iso
from .home import InstanceHome, is_note_name
from .shapes import Document, InspectReport, LiveMemory
from .state import StateDir

__all__ = ["PREVIEW_CAP", "preview_file", "preview_text", "inspect_source"]

PREVIEW_CAP = 256 * 1024
"""The per-document preview cap in bytes."""


class _Unsafe(Exception):
    pass


def preview_text(data: bytes, size: int) -> Document:
    """A preview of ``data`` (at most cap+1 bytes of a document of ``size`` bytes)."""
    if size <= PREVIEW_CAP and len(data) <= PREVIEW_CAP:
        return {"text": data.decode("utf-8", errors="replace")}
    cut = data[:PREVIEW_CAP]
    cut = cut[: len(cut) - _partial_tail(cut)]
    return {"text": cut.decode("utf-8", errors="replace"), "truncated": True, "bytes": max(size, len(data))}


def _partial_tail(cut: bytes) -> int:
    """How many bytes at the end of ``cut`` start a UTF-8 character the cut left unfinished."""
    for back in range(1, min(4, len(cut)) + 1):
        byte = cut[-back]
        if byte & 0xC0 != 0x80:
            need = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4 if byte >> 3 == 0b11110 else 1
            return back if need > back else 0
    return 0


def preview_file(path: Path) -> Document:
    """Read at most cap+1 bytes of a plain regular file (no links, no FIFOs, never blocking)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            raise _Unsafe(f"{path} is not a plain regular file")
        chunks, left = [], PREVIEW_CAP + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return preview_text(b"".join(chunks), info.st_size)
    finally:
        os.close(fd)


def _live_documents(home: InstanceHome) -> list[Document]:
    docs: list[Document] = []
    for label, name in (("Working state (STATE.md)", "STATE.md"), ("Log (log.md)", "log.md")):
        path = home.path / name
        if not os.path.lexists(path):
            continue
        if os.path.islink(path):
            raise _Unsafe(f"{name} is a symlink")
        docs.append({"label": label, "kind": "markdown", "path": str(path), **preview_file(path)})
    notes: list[str] = []
    if os.path.lexists(home.notes_dir):
        if os.path.islink(home.notes_dir):
            raise _Unsafe("notes/ is a symlink")
        for folder, dirs, files in os.walk(home.notes_dir):
            for d in dirs:
                if os.path.islink(os.path.join(folder, d)):
                    raise _Unsafe(f"notes folder {d} is a symlink")
            for name in files:
                full = os.path.join(folder, name)
                if is_note_name(name):
                    if os.path.islink(full):
                        raise _Unsafe(f"note {name} is a symlink")
                    notes.append(os.path.relpath(full, home.notes_dir))
    for name in sorted(notes):
        path = home.notes_dir / name
        docs.append({"label": f"Pending note: {name}", "kind": "markdown", "path": str(path), **preview_file(path)})
    return docs


def inspect_source(state: StateDir, source_id: str, *, at: float) -> InspectReport:
    """The inspection report of one source (read-only: no capture, refresh or judging)."""
    source = state.source(source_id)
    status = state.status(source_id)
    home = InstanceHome(Path(source["home"]))
    live: LiveMemory = {"available": False, "reason": "live", "observedAt": iso(at)}
    documents: list[Document] = []
    if status.get("retired"):
        live["reason"] = "retired"
    elif not os.path.isdir(home.path) or os.path.islink(home.path):
        live["reason"] = "missing-home"
    else:
        try:
            before = home.marker()
            if before is None:
                live["reason"] = "missing-marker"
            elif before.get("id") != source_id:
                live["reason"] = "identity-mismatch"
            else:
                documents = _live_documents(home)
                if home.marker() != before:
                    live["reason"], documents = "home-changed", []
                else:
                    live["available"] = True
        except (_Unsafe, OSError) as exc:
            live.update({"reason": "unverified-home", "error": str(exc)})
            documents = []
    receipts = json.dumps(status, indent=2, ensure_ascii=False).encode("utf-8")
    documents.append({"label": "Durable processing receipts", "kind": "text",
                      "path": str(state.source_dir(source_id) / "status.json"), **preview_text(receipts[:PREVIEW_CAP + 1], len(receipts))})
    decl = source.get("decl", {})
    summary = (f"source {source_id} ({source.get('agent')}): {len(status['captured']['inputs'])} inputs captured, "
               f"{len(status['processed'])} processed; live memory {live['reason']}")
    return {
        "summary": summary, "source": source_id, "owns": decl.get("owns", []), "reads": decl.get("reads", []),
        "bases": source.get("bindings", {}).get("bases", {}),
        "authority": {"schemaVersion": 1, "registration": "registered", "capture": status.get("lastCapture"),
                      "migrationRequired": False},
        "acceptedView": source.get("acceptedView"), "status": status, "scheduler": {"kind": "watcher"},
        "liveMemory": live, "documents": documents,
    }
