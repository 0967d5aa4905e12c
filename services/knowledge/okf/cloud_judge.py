"""Judging on the crouter runtime: ``CrouterJudgeClient`` starts one isolated run per judgment.

The run is started through the SDK with ``isolated=True``, an id chosen here and ``cwd`` inside
that run's root folder (``/apps/<app>/nodes/<run id>/work``); its prompt carries ``input.json``,
``staging.json`` and ``concepts.json``. The reply text of the root node's first turn is the
``judgment.json``. On the fake cloud the responder answers with ``deterministic_judge_reply``::

    cloud.runs.respond(lambda ctx: ctx.run.reply(deterministic_judge_reply(ctx.run.params["prompt"])))

The client is duck-typed (anything with ``runs.start`` and ``runs.events`` like the SDK's
``Crouter``), so this module imports nothing from the SDK.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from .errors import OkfError

if TYPE_CHECKING:
    from ...sdk import Crouter

__all__ = ["CrouterJudgeClient", "JudgeRunError"]


class JudgeRunError(OkfError):
    """The judge run ended without a reply (its turn failed or the run settled first)."""

    code = "E_RUN"


class CrouterJudgeClient:
    """A ``JudgeClient`` that judges each prompt in a fresh isolated run."""

    def __init__(self, client: Crouter, *, app: str, timeout: float = 600.0) -> None:
        self._client = client
        self._app = app
        self.timeout = timeout
        """How long a judge run may take to reply, in seconds, before the judgment is given up."""
        self.runs: list[str] = []
        """The ids of the runs this client started, oldest first."""

    async def judge(self, prompt: str, *, cwd: str) -> str:
        """Start the judge run and return its first reply's text (``cwd`` is the local work folder)."""
        run_id = f"run_judge{uuid.uuid4().hex[:16]}"
        root = f"/apps/{self._app}/nodes/{run_id}"
        run = await self._client.runs.start(prompt=prompt, isolated=True, cwd=f"{root}/work", id=run_id,
                                            name="okf judgment")
        self.runs.append(run.id)
        try:
            return await asyncio.wait_for(self._reply(run.id), self.timeout)
        except asyncio.TimeoutError:
            raise JudgeRunError(f"judge run {run.id} did not reply within {self.timeout:g}s") from None

    async def _reply(self, run_id: str) -> str:
        cursor: int | None = None
        text = ""
        while True:
            stream = self._client.runs.events(run_id, after=cursor)
            try:
                async for event in stream:
                    if event.node_id != run_id:
                        continue
                    if event.type == "node.output_text.done":
                        text = str(event.data.get("text", ""))
                    elif event.type == "node.turn.completed":
                        if event.data.get("stop_reason") == "error":
                            error = event.data.get("error") or {}
                            raise JudgeRunError(f"judge run {run_id} failed: {error.get('code')}: {error.get('message')}")
                        return text
                    elif event.type == "node.settled":
                        raise JudgeRunError(f"judge run {run_id} settled ({event.data.get('outcome')}) without a reply")
            finally:
                cursor = stream.cursor
                await stream.aclose()
            if stream.end_reason == "dropped":
                raise JudgeRunError(f"judge run {run_id} was deleted before it replied")
