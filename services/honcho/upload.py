"""Reading Honcho's file upload (``POST .../sessions/{s}/messages/upload``, ``multipart/form-data``).

As the server's ``src/utils/files.py``: form fields ``peer_id`` (required), ``metadata``,
``configuration`` (JSON text; unreadable JSON is ignored, as there) and ``created_at``, and one
``file`` of at most 5 MB (413 above). ``text/*`` is decoded as UTF-8, UTF-16 or Latin-1;
``application/json`` must be UTF-8 JSON (422 otherwise) and is stored re-serialised; any other type
is 415 (the server also reads PDFs; the fake has no PDF reader and says so). The text is split into
messages of at most 25,000 characters at paragraph, line, sentence or word boundaries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from email.message import Message
from email.parser import BytesParser
from email.policy import HTTP

from ..honcho_wire import JSON, ValidationIssue

__all__ = ["MAX_FILE_SIZE", "Upload", "UploadError", "read_upload", "split_text"]

MAX_FILE_SIZE = 5_242_880


class UploadError(ValueError):
    """An upload the server refuses: ``status`` and Honcho's ``detail``."""

    def __init__(self, status: int, detail: str | list[ValidationIssue]) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Upload:
    """The form and the file's text."""

    peer_id: str
    metadata: JSON
    created_at: str | None
    text: str


def _form_error(field: str) -> UploadError:
    return UploadError(422, [{"type": "missing", "loc": ["body", field], "msg": "Field required", "input": None}])


def read_upload(content_type: str, body: bytes) -> Upload:
    """The upload in ``body`` (a ``multipart/form-data`` request's body)."""
    if not content_type.lower().startswith("multipart/form-data"):
        raise _form_error("file")
    parsed = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n"
                                                 + body)
    fields: dict[str, str] = {}
    file: Message | None = None
    for part in parsed.iter_parts() if parsed.is_multipart() else []:
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        if name == "file":
            file = part
        else:
            payload = part.get_payload(decode=True)
            fields[name] = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    if not fields.get("peer_id"):
        raise _form_error("peer_id")
    if file is None:
        raise _form_error("file")
    raw = file.get_payload(decode=True)
    data = raw if isinstance(raw, bytes) else b""
    if len(data) > MAX_FILE_SIZE:
        raise UploadError(413, f"File size ({len(data)} bytes) exceeds maximum allowed size ({MAX_FILE_SIZE} bytes)")
    kind = (file.get_content_type() or "").lower()
    metadata = _json_or_none(fields.get("metadata"))
    return Upload(fields["peer_id"], metadata, fields.get("created_at") or None, _text(kind, data))


def _json_or_none(text: str | None) -> JSON:
    if not text:
        return None
    try:
        value: JSON = json.loads(text)
    except ValueError:
        return None
    return value


def _text(kind: str, data: bytes) -> str:
    if kind.startswith("text/"):
        for encoding in ("utf-8", "utf-16", "latin-1"):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                continue
    if kind == "application/json":
        try:
            decoded = data.decode("utf-8")
        except UnicodeDecodeError:
            raise UploadError(422, "JSON uploads must be UTF-8 encoded") from None
        if not decoded.strip():
            return ""
        try:
            return json.dumps(json.loads(decoded), ensure_ascii=False)
        except ValueError:
            raise UploadError(422, "Uploaded JSON is invalid") from None
    raise UploadError(415, f"Unsupported file type: {kind}. Supported types: ['TextProcessor', 'JSONProcessor'] "
                           "(the fake reads no PDF)")


def split_text(text: str, max_chars: int) -> list[str]:
    """``text`` in chunks of at most ``max_chars``, broken at the best boundary (as the server)."""
    if len(text) <= max_chars:
        return [text]
    chunks: list[str] = []
    pos = 0
    while pos < len(text):
        end = pos + max_chars
        if end >= len(text):
            chunks.append(text[pos:])
            break
        cut = end
        for delimiter in ("\n\n", "\n", ". ", " "):
            found = text.rfind(delimiter, pos, end)
            if found > pos:
                cut = found + len(delimiter)
                break
        chunks.append(text[pos:cut])
        pos = cut
    return chunks
