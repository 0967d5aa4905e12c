"""``EventStream``: a ``Log`` fed through a deque drained by a ~30 fps timer, with follow and pause.

Writers call ``replace(lines)`` (a new source) or ``extend(lines)`` (new lines); nothing is written
to the ``Log`` per line. While paused, new lines wait and ``held`` counts them ("+N new").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Log

__all__ = ["EventStream"]

DRAIN_HZ = 30
"""How often queued lines are written (frames per second)."""
BATCH = 5_000
"""Most lines written in one frame; the rest wait for the next frame."""


class EventStream(Log):
    """A live stream of pre-sanitised lines."""

    DEFAULT_CSS = """
    EventStream { height: 1fr; }
    """

    paused: reactive[bool] = reactive(False)
    """Paused: new lines are held (and counted) instead of shown."""
    held: reactive[int] = reactive(0)
    """How many lines arrived while paused."""

    class StateChanged(Message):
        """Paused or the held count changed."""

        def __init__(self, stream: "EventStream") -> None:
            super().__init__()
            self.stream = stream

        @property
        def control(self) -> "EventStream":
            return self.stream

    def __init__(self, *, id: str | None = None, classes: str | None = None, max_lines: int | None = 200_000) -> None:
        super().__init__(id=id, classes=classes, max_lines=max_lines, auto_scroll=True)
        self._line_queue: deque[str] = deque()
        self._held: list[str] = []

    def on_mount(self) -> None:
        self._timer = self.set_interval(1 / DRAIN_HZ, self._drain, pause=True)
        """Runs only while lines wait (an idle stream costs nothing)."""

    def watch_paused(self, paused: bool) -> None:
        if not paused and self._held:
            self._line_queue.extend(self._held)
            self._held.clear()
            self.held = 0
            self.scroll_end(animate=False)
            self._wake()
        self.post_message(self.StateChanged(self))

    def watch_held(self) -> None:
        self.post_message(self.StateChanged(self))

    def replace(self, lines: Iterable[str]) -> None:
        """Show a new source from scratch (queued lines and held lines are dropped)."""
        self._line_queue.clear()
        self._held.clear()
        self.held = 0
        self.clear()
        self._line_queue.extend(lines)
        self._drain()
        self._wake()

    def extend(self, lines: Iterable[str]) -> None:
        """Queue new lines (held and counted while paused)."""
        if self.paused:
            before = len(self._held)
            self._held.extend(lines)
            self.held += len(self._held) - before
        else:
            self._line_queue.extend(lines)
            self._wake()

    def _wake(self) -> None:
        timer = getattr(self, "_timer", None)
        if timer is not None and self._line_queue:
            timer.resume()

    @property
    def queued(self) -> int:
        """Lines waiting for the next frame."""
        return len(self._line_queue)

    @property
    def shown(self) -> list[str]:
        """The lines currently in the log (for tests and the detail view)."""
        return list(self.lines)

    def flush(self) -> None:
        """Write every queued line now (used before a screenshot)."""
        while self._line_queue:
            self._drain()

    def _drain(self) -> None:
        if not self._line_queue:
            timer = getattr(self, "_timer", None)
            if timer is not None:
                timer.pause()
            return
        count = min(len(self._line_queue), BATCH)
        batch = [self._line_queue.popleft() for _ in range(count)]
        self.write_lines(batch, scroll_end=not self.paused)
