"""The served wire and the control API, published as OpenAPI 3.1 at ``GET /openapi.json`` and
fuzzed with Schemathesis against a real ``workbench serve``: no answer is a 500, every answer is
what the document says (status, content type, schema)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from services.control_wire import CONTROL_PREFIX, CONTROL_ROUTES
from services.openapi import RUNTIME_REQUESTS, openapi_document
from services.wire import ROUTES
from tests.served.conftest import Served

from .served_http import app_token

CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance, content_type_conformance]


def test_the_document_declares_every_route_of_the_wire_and_the_control_api() -> None:
    doc = openapi_document("http://127.0.0.1:1")
    assert doc["openapi"].startswith("3.1")
    operations = {op["operationId"] for item in doc["paths"].values() for op in item.values()}
    assert {r.op.replace(".", "_") for r in ROUTES} <= operations
    assert {"control_" + r.name.replace(".", "_") for r in CONTROL_ROUTES} <= operations
    assert set(RUNTIME_REQUESTS) == {r.op for r in ROUTES}
    json.dumps(doc)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One ``workbench serve`` for the module (small limits, so a held read or a stream ends fast)."""
    folder: Path = tmp_path_factory.mktemp("openapi") / "ws"
    served = Served(folder, "--max-wait", "0.2", "--max-body", "65536")
    try:
        token = asyncio.run(app_token(served.url, served.info["token"], "user:fuzz"))
        yield {"url": served.url, "control": served.info["token"], "access": token}
    finally:
        served.proc.stop()


@pytest.fixture(scope="module")
def api_schema(live: dict[str, Any]) -> Any:
    answer = httpx.get(live["url"] + "/openapi.json")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    return schemathesis.openapi.from_dict(answer.json())


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.mark.long
@schema.parametrize()
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.generate])
def test_no_500_and_every_answer_matches_the_document(case: Any, live: dict[str, Any]) -> None:
    if case.operation.path.endswith(("/events", "/changes")) and case.method == "GET":
        pytest.skip("an event stream answers for as long as it is open (tests/security/test_bad_input.py)")
    token = live["control"] if case.path.startswith(CONTROL_PREFIX) else live["access"]
    case.call_and_validate(base_url=live["url"], headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)


@pytest.mark.long
def test_stateful_sequences_follow_the_documented_links(api_schema: Any, live: dict[str, Any]) -> None:
    """Start a run, then read, message, rename, cancel and delete it by the id the answer gave (and
    script a failure, then remove it): the links in the document, followed for a bounded number of
    steps."""
    streams = api_schema.exclude(method="GET", path_regex=r"/(events|changes)$")  # answers that never end
    base = streams.as_state_machine()

    class Machine(base):  # type: ignore[misc,valid-type]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            token = live["control"] if case.path.startswith(CONTROL_PREFIX) else live["access"]
            return {"base_url": live["url"], "headers": {"Authorization": f"Bearer {token}"}}

        def validate_response(self, response: Any, case: Any, additional_checks: Any = None, **kwargs: Any) -> None:
            case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs)

    Machine.run(settings=settings(max_examples=8, stateful_step_count=6, deadline=None,
                                  suppress_health_check=list(HealthCheck)))
