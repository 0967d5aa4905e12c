"""``workbench connect --key FILE --assertion / --access-token``: what a raw HTTP client needs, from a shell."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import httpx
import jwt

from .conftest import workbench

FORM_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def test_an_assertion_signs_with_the_key_file_made_on_first_use_and_refreshes_a_token(serve, tmp_path: Path) -> None:
    served = serve(tmp_path / "ws")
    key = tmp_path / "app-key.pem"
    printed = workbench("connect", "--workspace", str(tmp_path / "ws"), "--key", str(key), "--assertion")
    assert printed.returncode == 0, printed.stderr
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600 and "PRIVATE KEY" in key.read_text()
    assertion = printed.stdout.strip()
    claims = jwt.decode(assertion, options={"verify_signature": False})
    assert claims["iss"] == claims["sub"] == "workbench"
    assert claims["aud"] == served.url + "/oauth/token" and claims["exp"] - claims["iat"] == 300
    assert "jwk" in jwt.get_unverified_header(assertion)
    connection = json.loads(workbench("connect", "--workspace", str(tmp_path / "ws"), "user:o1").stdout)
    refreshed = httpx.post(served.url + "/oauth/token", timeout=10, data={
        "grant_type": "refresh_token", "refresh_token": connection["refresh_token"], "client_id": "workbench",
        "client_assertion_type": FORM_TYPE, "client_assertion": assertion})
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.json()["access_token"]
    again = workbench("connect", "--workspace", str(tmp_path / "ws"), "--key", str(key), "--assertion")
    assert again.stdout.strip() != assertion  # a fresh one each time (its own jti), same key
    assert jwt.get_unverified_header(again.stdout.strip())["jwk"] == jwt.get_unverified_header(assertion)["jwk"]


def test_an_access_token_is_fresh_and_the_runtime_takes_it(serve, tmp_path: Path) -> None:
    served = serve(tmp_path / "ws")
    printed = workbench("connect", "--workspace", str(tmp_path / "ws"), "user:o1", "--scope", "crtr:llm", "crtr:act",
                        "--key", str(tmp_path / "app-key.pem"), "--access-token")
    assert printed.returncode == 0, printed.stderr
    token = printed.stdout.strip()
    assert "\n" not in token and jwt.decode(token, options={"verify_signature": False})["exp"] > time.time()
    listed = httpx.get(served.url + "/v1/runs", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert listed.status_code == 200, listed.text


def test_an_access_token_without_a_server_comes_from_the_stored_cloud(tmp_path: Path) -> None:
    printed = workbench("connect", "--workspace", str(tmp_path / "ws"), "user:o1",
                        "--key", str(tmp_path / "app-key.pem"), "--access-token")
    assert printed.returncode == 0, printed.stderr
    assert jwt.decode(printed.stdout.strip(), options={"verify_signature": False})["exp"] > time.time()


def test_bad_connect_flags_are_refused_in_plain_words(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    no_key = workbench("connect", "--workspace", ws, "user:o1", "--access-token")
    assert no_key.returncode == 2 and "need --key FILE" in no_key.stderr and not no_key.stdout
    nobody = workbench("connect", "--workspace", ws)
    assert nobody.returncode == 2 and "name the person" in nobody.stderr
    both = workbench("connect", "--workspace", ws, "user:o1", "--key", "k.pem", "--assertion", "--access-token")
    assert both.returncode == 2 and "not allowed with" in both.stderr
    (tmp_path / "junk.pem").write_text("not a key", encoding="utf-8")
    junk = workbench("connect", "--workspace", ws, "--key", str(tmp_path / "junk.pem"), "--assertion")
    assert junk.returncode == 2 and "not a PEM private key" in junk.stderr and not junk.stdout
    assert (tmp_path / "junk.pem").read_text(encoding="utf-8") == "not a key"  # left as it was


def test_serve_on_another_port_of_a_served_folder_says_so_instead_of_attaching(serve, tmp_path: Path) -> None:
    from workbench import cli
    from workbench.served import check_ui_serve

    served = serve(tmp_path / "ws")
    other = served.port + 1 if served.port < 65535 else served.port - 1
    problem = check_ui_serve(tmp_path / "ws", other)
    assert problem is not None and f"already served at {served.url}" in problem and f"not on port {other}" in problem
    assert check_ui_serve(tmp_path / "ws", served.port) is None  # the same port: the window attaches
    assert check_ui_serve(tmp_path / "ws", None) is None and check_ui_serve(tmp_path / "ws", 0) is None
    assert cli.main(["--workspace", str(tmp_path / "ws"), "--serve", "--port", str(other)]) == 2
