"""An app's recorded runtime call as the SDK call that makes it, to replay and to write as code.

``SDK_CALLS`` maps each wire operation an app's call can be to the ``Crouter`` method that sends it,
as ``(method, arguments)``: the arguments are read from the call's path parameters, query and body.
A stream read (``run.events``) is not replayed: it changes nothing, and a live run's stream does not
end. ``attempts`` folds the retries the SDK made on its own (a call answered with an error, then the
same call again) into one step, since replaying the call through the SDK retries by itself.
"""

from __future__ import annotations

import keyword
from collections.abc import Awaitable, Callable, Mapping
from operator import attrgetter
from typing import TYPE_CHECKING

from ..wire import match_route
from .format import Step, StepFields

if TYPE_CHECKING:
    from ..sdk import Crouter

__all__ = ["SDK_CALLS", "sdk_call", "sdk_code", "keyword_arguments", "attempts"]

# op -> (Crouter attribute path, positional sources, keyword sources); a source is
# "path:NAME", "body:NAME", "query:NAME" or "body" (the whole body as keywords).
SDK_CALLS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "run.start": ("runs.start", (), ("body",)),
    "run.get": ("runs.get", ("path:run_id",), ()),
    "run.list": ("runs.list", (), ("query:status", "query:limit")),
    "run.message": ("runs.message", ("path:run_id", "body:text"), ("body:start_turn",)),
    "run.interrupt": ("runs.interrupt", ("path:run_id",), ()),
    "run.cancel": ("runs.cancel", ("path:run_id",), ()),
    "run.delete": ("runs.delete", ("path:run_id",), ()),
    "run.rename": ("runs.rename", ("path:run_id", "body:name"), ()),
    "trace.get": ("runs.trace", ("path:run_id",), ()),
    "question.get": ("questions.get", ("path:question_id",), ()),
    "question.answer": ("questions.answer", ("path:question_id", "body:answers"), ()),
    "memory.list": ("memory.list", (), ("query:kind",)),
    "memory.get": ("memory.get", ("path:name",), ()),
    "grant.get": ("grant.get", (), ()),
    "provider.tools": ("providers.tools", (), ()),
    "provider.call": ("providers.call", ("path:provider", "path:tool", "body:arguments"), ()),
    "profile.list": ("profiles.list", (), ()),
}


def _arguments(step: StepFields, ids: Callable[[str], object]) -> tuple[str, list[object], dict[str, object]] | None:
    spec = SDK_CALLS.get(str(step.get("op")))
    matched = match_route(str(step.get("method")), str(step.get("path")))
    if spec is None or matched is None:
        return None
    name, positional, keywords = spec
    params = {k: ids(v) for k, v in matched[1].items()}
    query = dict(step.get("query") or {})
    body = dict(step.get("body") or {})
    sources = {"path": params, "query": query, "body": body}

    def value(source: str) -> object:
        where, _, field = source.partition(":")
        return sources[where].get(field)

    args = [value(source) for source in positional]
    kwargs: dict[str, object] = {}
    for source in keywords:
        if source == "body":
            kwargs.update({k: v for k, v in body.items() if k != "idempotency_key"})
        else:
            found = value(source)
            if found is not None:
                field = source.partition(":")[2]
                kwargs[field] = int(str(found)) if field == "limit" and str(found).isdigit() else found
    return name, args, kwargs


def sdk_call(step: StepFields, ids: Callable[[str], str]) -> Callable[["Crouter"], Awaitable[object]] | None:
    """The SDK call that replays an app's recorded call (``client`` -> awaitable), or None."""
    found = _arguments(step, ids)
    if found is None:
        return None
    name, args, kwargs = found

    async def call(client: "Crouter") -> object:
        method: Callable[..., Awaitable[object]] = attrgetter(name)(client)
        return await method(*args, **kwargs)
    return call


def sdk_code(step: StepFields, client: str, ids: Callable[[str], object] = str) -> str | None:
    """The same call as Python source, on the client named ``client`` (values as ``repr``)."""
    found = _arguments(step, ids)
    if found is None:
        return None
    name, args, kwargs = found
    return f"{client}.{name}({', '.join([repr(a) for a in args] + keyword_arguments(kwargs))})"


def keyword_arguments(values: Mapping[str, object]) -> list[str]:
    """Keyword arguments as Python source: ``name=<repr>`` for a name that is a plain ASCII identifier
    and no keyword, the rest (``from``, ``a-b``, a name Python would normalise) in one ``**{<repr>: ...}``.
    A name or value from a recording is data in the source, never code."""
    plain = [f"{k}={v!r}" for k, v in values.items() if _plain_name(k)]
    odd = {k: v for k, v in values.items() if not _plain_name(k)}
    return plain + ([f"**{odd!r}"] if odd else [])


def _plain_name(name: object) -> bool:
    """A name that may be written as ``name=`` (ASCII: Python folds other identifiers with NFKC, so
    ``ﬁ`` would be sent as ``fi``)."""
    return (isinstance(name, str) and name.isascii() and name.isidentifier() and not keyword.iskeyword(name)
            and not keyword.issoftkeyword(name))


def attempts(steps: list[Step]) -> list[Step]:
    """The steps with an app's retried call folded into its last attempt (``attempts``: how many)."""
    out: list[Step] = []
    for step in steps:
        previous = out[-1] if out else None
        if (previous is not None and step["kind"] == "app" and previous["kind"] == "app"
                and (previous.get("status") or 0) >= 400
                and previous.get("user") in (None, step.get("user"))
                and (previous.get("op"), previous.get("path"), previous.get("body"), previous.get("key"))
                == (step.get("op"), step.get("path"), step.get("body"), step.get("key"))):
            folded = step.copy()  # the same keys in the same order as ``{**step, "n": ..., ...}``
            folded["n"] = previous["n"]
            folded["attempts"] = previous.get("attempts", 1) + 1
            folded["last_n"] = step["n"]
            out[-1] = folded
            continue
        out.append(step)
    return out
