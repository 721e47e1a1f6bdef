"""Signing in to the console with a token from the identity provider where `[auth.oidc]` is configured."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from gateway.base.config import from_mapping
from gateway.server.app import bootstrap_admin, create_app, open_services
from tests.api.test_oidc import AUDIENCE, ISSUER, JwksServer, claims, jwks, rsa_key, sign


async def test_a_valid_oidc_token_signs_in_and_an_expired_one_does_not(tmp_path: Path) -> None:
    """A verified JWT opens a session acting as the member it names (the API's own resolution, groups
    included); an expired or wrongly signed token is 401 and opens none."""
    key, stranger = rsa_key("console-key"), rsa_key("other-key")
    idp = JwksServer()
    idp.document = jwks(key)
    config = from_mapping({"auth": {"oidc": {"issuer": ISSUER, "audience": AUDIENCE, "jwks_url": idp.url}}})
    services = await open_services(config.with_overrides(data_dir=tmp_path / "data"),
                                   http_client=httpx.AsyncClient(trust_env=False))
    try:
        await bootstrap_admin(services.store, announce=False)
        app = create_app(config, services=services)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memfed.test") as browser:
            for bad in (sign(key, claims(sub="late", exp=int(time.time()) - 60)), sign(stranger, claims(sub="x"))):
                refused = await browser.post("/console/session", json={"credential": bad})
                assert refused.status_code == 401 and "set-cookie" not in refused.headers
            answer = await browser.post("/console/session", json={"credential": sign(key, claims(sub="ana"))})
            assert answer.status_code == 201, answer.text
            assert answer.json()["member"]["name"] == "ana" and answer.json()["member"]["admin"] is False
            me = await browser.get("/console/api/v1/members/me")
            assert me.status_code == 200 and me.json()["name"] == "ana"
    finally:
        await services.close()
        idp.close()
