"""The canvas's text policy, applied at its door: every argument of every public call is checked.

The canvas REFUSES text it cannot store faithfully (see ``services.text``): a lone surrogate or a
NUL in any string an entry point takes (names and references, titles, previews, bodies, summaries,
messages, custom object names and catalogs, job commands, watch patterns, event data, search
queries, filters, a reader's view) raises ``TextRefusedError`` (``NameTextRefusedError`` for names
and references) before any database work, so nothing is half written and no raw
``UnicodeEncodeError`` ever leaves the canvas. Run text from the cloud is not typed by a caller and
cannot be sent again, so ``RunBridge`` repairs and flags it instead of calling through this door
with it unrepaired.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import ParamSpec, TypeVar

from services.text import value_problem

from .errors import NameTextRefusedError, TextRefusedError

__all__ = ["NAME_ARGUMENTS", "text_refusal", "refuse_bad_text", "checks_text"]

NAME_ARGUMENTS = frozenset({
    "ref", "name", "to", "owner", "actor", "reader", "watcher", "sender", "node", "parent", "listener",
    "node_id", "handle", "view", "principle", "plugin", "scope",
})
"""Arguments that name or point at objects: bad text there is also a refused name."""

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")


def _plain(value: object) -> object:
    """``value`` with mappings, dataclasses and sets turned into the dicts and lists ``value_problem`` walks."""
    if isinstance(value, str):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(item) for item in value]
    return value


def text_refusal(method: str, arguments: Mapping[str, object]) -> TextRefusedError | None:
    """The refusal for the first argument holding a lone surrogate or NUL, or None when all are clean."""
    for name, value in arguments.items():
        problem = value_problem(_plain(value), name)
        if problem is None:
            continue
        error = NameTextRefusedError if name in NAME_ARGUMENTS else TextRefusedError
        return error(f"{method}: {problem}; canvas text must be valid Unicode without NUL characters",
                     field=name)
    return None


def refuse_bad_text(method: str, arguments: Mapping[str, object]) -> None:
    """Raise ``text_refusal(method, arguments)`` if there is one."""
    error = text_refusal(method, arguments)
    if error is not None:
        raise error


def _guarded(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    signature = inspect.signature(fn)
    method = getattr(fn, "__name__", "call")

    @functools.wraps(fn)
    async def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return await fn(*args, **kwargs)  # let the call itself say what is wrong
        refuse_bad_text(method, {k: v for k, v in bound.arguments.items() if k != "self"})
        return await fn(*args, **kwargs)

    guarded.__text_checked__ = True  # type: ignore[attr-defined]
    return guarded


def checks_text(cls: type[T]) -> type[T]:
    """Class decorator: every public coroutine method refuses bad text in any argument before it runs."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.iscoroutinefunction(member):
            setattr(cls, name, _guarded(member))
    return cls
