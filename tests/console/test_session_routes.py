"""The console's server side in-process: sign-in, the session cookie, CSRF, sign-out, the API as the member."""

from __future__ import annotations

import contextlib
import fnmatch
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.base.config import from_mapping
from gateway.console.sessions import COOKIE, Sessions
from gateway.server.app import bootstrap_admin, create_app, open_services

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[tuple[Any, str]]:
    config = from_mapping({}).with_overrides(data_dir=tmp_path / "data")
    services = await open_services(config)
    key = await bootstrap_admin(services.store, announce=False)
    assert key is not None
    try:
        yield create_app(config, services=services), key
    finally:
        await services.close()


def browser(app: Any, scheme: str = "http") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=f"{scheme}://memfed.test")


@contextlib.asynccontextmanager
async def signed_in(app: Any, key: str) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    async with browser(app) as client:
        answer = await client.post("/console/session", json={"credential": key})
        assert answer.status_code == 201, answer.text
        yield client, answer.json()["csrf_token"]


async def test_sign_in_sets_an_httponly_strict_cookie_and_never_returns_the_key(app: tuple[Any, str]) -> None:
    """The cookie is HttpOnly, SameSite=Strict, scoped to /console, not Secure over plain HTTP; the answer
    names the member and a CSRF token, never the credential."""
    application, key = app
    async with browser(application) as client:
        answer = await client.post("/console/session", json={"credential": key})
        cookie = answer.headers["set-cookie"]
        assert answer.status_code == 201
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
        assert "Secure" not in cookie
        assert key not in answer.text and key not in cookie
        assert answer.json()["member"]["admin"] is True and answer.json()["csrf_token"]


async def test_the_cookie_is_secure_when_served_over_tls(app: tuple[Any, str]) -> None:
    """Over https the session cookie carries Secure."""
    application, key = app
    async with browser(application, "https") as client:
        answer = await client.post("/console/session", json={"credential": key})
        assert "Secure" in answer.headers["set-cookie"]


async def test_a_wrong_credential_is_refused_without_a_session(app: tuple[Any, str]) -> None:
    """401 invalid_credentials in the envelope, and no cookie is set."""
    application, _ = app
    async with browser(application) as client:
        answer = await client.post("/console/session", json={"credential": "mf_not_a_key"})
        assert answer.status_code == 401 and answer.json()["error"]["code"] == "invalid_credentials"
        assert "set-cookie" not in answer.headers
        assert (await client.get("/console/api/v1/memories")).status_code == 401


async def test_a_change_without_the_csrf_token_is_refused_and_changes_nothing(app: tuple[Any, str]) -> None:
    """POST through the console without X-CSRF-Token, or with a wrong one, is 403 and no memory is made;
    with the session's token it is the API's own answer."""
    application, key = app
    async with signed_in(application, key) as (client, csrf):
        for headers in ({}, {"X-CSRF-Token": "forged"}):
            refused = await client.post("/console/api/v1/memories", json={"name": "Sneaky"}, headers=headers)
            assert refused.status_code == 403
            assert refused.json()["error"]["code"] == "memfed_csrf_token_invalid"
        assert (await client.get("/console/api/v1/memories")).json()["data"] == []
        made = await client.post("/console/api/v1/memories", json={"name": "Real"}, headers={"X-CSRF-Token": csrf})
        assert made.status_code == 201 and made.json()["name"] == "Real"


async def test_the_console_acts_as_the_member_and_the_audit_says_so(app: tuple[Any, str]) -> None:
    """A member signed in to the console gets the API's 403 for a root, and the decision log records the
    member (not the console) as the principal."""
    application, admin_key = app
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=application), base_url="http://memfed.test",
                                 headers={"Authorization": f"Bearer {admin_key}"}) as admin:
        made = (await admin.post("/v1/members", json={"name": "eve", "type": "human"})).json()
        eve_key = (await admin.post(f"/v1/members/{made['id']}/keys")).json()["key"]
        async with signed_in(application, eve_key) as (client, csrf):
            refused = await client.post("/console/api/v1/memories", json={"name": "Root"},
                                        headers={"X-CSRF-Token": csrf})
            assert refused.status_code == 403
        log = (await admin.get("/v1/audit", params={"principal": f"member:{made['id']}"})).json()["data"]
        assert [e["decision"] for e in log if e["operation"].startswith("memories.create")] == ["deny"]


async def test_sign_out_needs_the_token_and_ends_the_session(app: tuple[Any, str]) -> None:
    """Sign-out without the token is 403 and the session lives; with it, the cookie no longer works."""
    application, key = app
    async with signed_in(application, key) as (client, csrf):
        assert (await client.post("/console/session/end")).status_code == 403
        assert (await client.get("/console/session")).status_code == 200
        ended = await client.post("/console/session/end", headers={"X-CSRF-Token": csrf})
        assert ended.status_code == 204
        kept = client.cookies.get(COOKIE)
        assert kept is None
        assert (await client.get("/console/api/v1/memories")).status_code == 401


async def test_a_change_from_another_origin_is_refused(app: tuple[Any, str]) -> None:
    """An Origin that is not the console's own is refused even with the token."""
    application, key = app
    async with signed_in(application, key) as (client, csrf):
        answer = await client.post("/console/api/v1/memories", json={"name": "X"},
                                   headers={"X-CSRF-Token": csrf, "Origin": "https://evil.example"})
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "memfed_console_cross_origin"


async def test_only_the_v1_api_is_reachable_through_the_console(app: tuple[Any, str]) -> None:
    """/console/api/mcp and other paths outside /v1 are 404, not forwarded."""
    application, key = app
    async with signed_in(application, key) as (client, _):
        for path in ("/console/api/mcp", "/console/api/openapi.json", "/console/api/../v1/memories"):
            assert (await client.get(path)).status_code == 404


async def test_every_console_answer_carries_a_strict_csp(app: tuple[Any, str]) -> None:
    """The page, a script and a proxied API answer carry a CSP without 'unsafe-inline'; the page has no
    inline script or style attribute."""
    application, key = app
    async with signed_in(application, key) as (client, _):
        for path in ("/console/", "/console/static/app.js", "/console/api/v1/memories"):
            answer = await client.get(path)
            assert answer.status_code == 200, path
            csp = answer.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
        page = (await client.get("/console/")).text
        assert "<script type=\"module\" src=" in page and "style=" not in page and "<style" not in page
        assert (await client.get("/console/static/../app.py")).status_code == 404
        moved = await client.get("/console")
        assert moved.status_code == 308 and moved.headers["location"] == "/console/"


def test_every_static_file_is_shipped_as_package_data() -> None:
    """Each file under gateway/console/static matches a package-data pattern of pyproject.toml, so an
    installed (non-editable) memfed serves the whole console."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "gateway.console"]
    static = ROOT / "gateway" / "console"
    files = [p.relative_to(static).as_posix() for p in (static / "static").rglob("*") if p.is_file()]
    assert files
    assert [f for f in files if not any(fnmatch.fnmatch(f, pattern) and f.count("/") == pattern.count("/")
                                        for pattern in patterns)] == []


def test_a_session_ends_after_idle_time_or_its_lifetime() -> None:
    """Idle past `idle` or older than `lifetime`, a cookie no longer finds its session."""
    now = [1000.0]
    sessions = Sessions(lifetime=100, idle=10, clock=lambda: now[0])
    cookie, _ = sessions.open("mf_key", "mbr_1")
    now[0] += 9
    assert sessions.get(cookie) is not None
    now[0] += 11
    assert sessions.get(cookie) is None
    cookie, _ = sessions.open("mf_key", "mbr_1")
    for _ in range(12):
        now[0] += 9
        sessions.get(cookie)
    assert sessions.get(cookie) is None
    assert repr(sessions.open("mf_secret_key", "mbr_1")[1]).find("mf_secret_key") == -1
