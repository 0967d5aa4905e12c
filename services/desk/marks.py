"""Marks: a letter names a selected object (a run, a grant, a node, an object, a judgment) in its pane.

Kept per workspace in ``marks.json`` in the workspace folder, written atomically (``services.files``)
on every change. A file that cannot be read (not JSON, too large, the wrong shape) gives no marks and a
``problem`` in words; the next mark writes a whole new file over it. Textual-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..files import CorruptFileError, atomic_write_json, read_json

__all__ = ["Mark", "Marks", "MARKS_FILE", "MARK_LETTERS"]

MARKS_FILE = "marks.json"
"""The marks' file in the workspace folder."""
MARK_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""The letters a mark may be named by."""
MAX_MARKS_BYTES = 256 * 1024
"""The largest marks file read."""


@dataclass(frozen=True, slots=True)
class Mark:
    """What a letter names: the pane, the item's key in it, and its label when marked."""

    pane: str
    key: str
    label: str


class Marks:
    """The workspace's marks by letter, read from and written to ``folder / MARKS_FILE``."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / MARKS_FILE
        """Where the marks are kept."""
        self.problem: str | None = None
        """Why the file could not be read (its marks are then empty), or None."""
        self.marks: dict[str, Mark] = self._read()
        """The marks by letter."""

    def _read(self) -> dict[str, Mark]:
        try:
            data = read_json(self.path, max_bytes=MAX_MARKS_BYTES)
        except FileNotFoundError:
            return {}
        except (OSError, CorruptFileError) as error:
            self.problem = f"{self.path}: cannot be read ({getattr(error, 'strerror', None) or error}); no marks"
            return {}
        marks: dict[str, Mark] = {}
        if not isinstance(data, dict):
            self.problem = f"{self.path}: not an object of marks by letter; no marks"
            return {}
        for letter, entry in data.items():
            if (letter in MARK_LETTERS and len(letter) == 1 and isinstance(entry, dict)
                    and all(isinstance(entry.get(k), str) for k in ("pane", "key", "label"))):
                marks[letter] = Mark(entry["pane"], entry["key"], entry["label"])
            else:
                self.problem = f"{self.path}: the mark {letter[:20]!r} is not a letter with a pane, key and label; skipped"
        return marks

    def set(self, letter: str, mark: Mark) -> None:
        """Name ``mark`` by ``letter`` and write the file. Raises ``ValueError`` for a letter outside
        ``MARK_LETTERS``; ``OSError`` when the file cannot be written (the marks are then as before)."""
        if len(letter) != 1 or letter not in MARK_LETTERS:
            raise ValueError(f"a mark is named by one letter a-z or A-Z, not {letter!r}")
        marks = {**self.marks, letter: mark}
        atomic_write_json(self.path, {k: {"pane": m.pane, "key": m.key, "label": m.label}
                                      for k, m in sorted(marks.items())})
        self.marks = marks
        self.problem = None

    def get(self, letter: str) -> Mark | None:
        """The mark named ``letter``, or None."""
        return self.marks.get(letter)
