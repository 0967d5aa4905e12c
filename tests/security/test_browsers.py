"""Only the machine's own apps talk to a served cloud: a DNS-rebinding page (a foreign ``Host``), a
page of another origin (``Origin``, ``Sec-Fetch-Site``) and a "simple" cross-site POST (a body that is
not JSON) are refused on every surface, ``/honcho`` included, before any route runs."""

from __future__ import annotations

import pytest

from services.control_wire import CONTROL_PREFIX

from .conftest import Guarded, envelope_of

READS = ["/v1/runs", "/.well-known/openid-configuration", CONTROL_PREFIX + "/people", "/honcho/v3/workspaces/list",
         "/openapi.json"]


@pytest.mark.parametrize("path", READS)
async def test_a_foreign_host_name_is_refused_with_421_everywhere(guarded: Guarded, path: str) -> None:
    method = "POST" if path.startswith("/honcho") else "GET"
    for host in ("evil.example", "evil.example:80", f"rebind.attacker.test:{guarded.server.port}"):
        answer = await guarded.http.request(method, path, headers={**guarded.as_operator(), "host": host},
                                            content=b"{}" if method == "POST" else None)
        assert answer.status_code == 421, (path, host, answer.text)
        assert envelope_of(answer)["code"] == "misdirected_request"


async def test_loopback_names_ip_literals_and_the_bound_address_are_served(guarded: Guarded) -> None:
    port = guarded.server.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "app.localhost", f"[::1]:{port}", "10.1.2.3"):
        answer = await guarded.http.get("/v1/runs", headers={**guarded.as_app(), "host": host})
        assert answer.status_code == 200, (host, answer.text)


@pytest.mark.parametrize("path", READS)
async def test_a_page_of_another_origin_is_refused_on_every_route(guarded: Guarded, path: str) -> None:
    method = "POST" if path.startswith("/honcho") else "GET"
    for headers in ({"origin": "https://evil.example"}, {"origin": "null"},
                    {"origin": f"http://localhost:{guarded.server.port + 1}"},
                    {"sec-fetch-site": "cross-site"}, {"sec-fetch-site": "same-site"}):
        answer = await guarded.http.request(method, path, headers={**guarded.as_operator(), **headers},
                                            content=b"{}" if method == "POST" else None)
        assert answer.status_code == 403, (path, headers, answer.text)
        assert envelope_of(answer)["code"] == "cross_origin"


async def test_a_page_of_the_server_itself_and_plain_clients_pass(guarded: Guarded) -> None:
    for headers in ({"origin": guarded.url}, {"sec-fetch-site": "same-origin"}, {"sec-fetch-site": "none"}, {}):
        answer = await guarded.http.get("/v1/runs", headers={**guarded.as_app(), **headers})
        assert answer.status_code == 200, (headers, answer.text)


async def test_a_simple_cross_site_post_never_reaches_a_route(guarded: Guarded) -> None:
    """``text/plain`` and form bodies need no preflight: they are refused with 415 and change nothing."""
    before = len(guarded.cloud.runs.all)
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        started = await guarded.http.post("/v1/runs", headers={**guarded.as_app(), "content-type": kind},
                                          content=b'{"prompt": "from a web page"}')
        assert started.status_code == 415, (kind, started.text)
        assert envelope_of(started)["code"] == "unsupported_media_type"
        reset = await guarded.http.post(CONTROL_PREFIX + "/fail_next", headers={**guarded.as_operator(),
                                                                                 "content-type": kind},
                                        content=b'{"op": "run.start", "answer": 503}')
        assert reset.status_code == 415, (kind, reset.text)
    assert len(guarded.cloud.runs.all) == before
    no_type = await guarded.http.post("/v1/runs", headers={"authorization": f"Bearer {guarded.access}"},
                                      content=b'{"prompt": "x"}')
    assert no_type.status_code == 415


async def test_the_token_endpoint_takes_its_form_and_json_routes_take_json(guarded: Guarded) -> None:
    form = await guarded.http.post("/oauth/token", data={"grant_type": "refresh_token"})
    assert form.status_code in (400, 401) and envelope_of(form)["origin"] == "directory"  # reached the directory
    started = await guarded.http.post("/v1/runs", headers=guarded.as_app(
        **{"content-type": "application/json; charset=utf-8"}), json={"prompt": "hello"})
    assert started.status_code == 201, started.text


async def test_honcho_refuses_a_foreign_host_and_origin_and_stores_nothing(guarded: Guarded) -> None:
    honcho = guarded.server.honcho
    for headers in ({"host": "evil.example"}, {"origin": "https://evil.example"},
                    {"sec-fetch-site": "cross-site"}):
        answer = await guarded.http.post("/honcho/v3/workspaces", json={"id": "from-a-page"},
                                         headers={"content-type": "text/plain", **headers})
        assert answer.status_code in (403, 421), (headers, answer.text)
    assert "from-a-page" not in honcho.workspace_ids()
