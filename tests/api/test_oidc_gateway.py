"""OIDC sign-in through the gateway: a verified JWT acts as a member made on first sight, groups mapped."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from joserfc import jwk

from tests.api._gateway import Gateway, make_config, running_gateway
from tests.api.test_oidc import AUDIENCE, ISSUER, JwksServer, claims, jwks, rsa_key, sign


@pytest.fixture(scope="module")
def key() -> jwk.RSAKey:
    return rsa_key("gw-key")


@pytest.fixture
def idp(key: jwk.RSAKey) -> Iterator[JwksServer]:
    server = JwksServer()
    server.document = jwks(key)
    yield server
    server.close()


@pytest.fixture
async def oidc_gateway(tmp_path: Path, idp: JwksServer) -> AsyncIterator[Gateway]:
    config = make_config(tmp_path, auth={"oidc": {
        "issuer": ISSUER, "audience": AUDIENCE, "jwks_url": idp.url, "type_claim": "member_type",
        "groups_claim": "groups"}})
    async with running_gateway(config, http_client=httpx.AsyncClient(trust_env=False)) as gw:
        yield gw


async def test_a_valid_token_acts_as_a_member_created_on_first_sight(oidc_gateway: Gateway, key: jwk.RSAKey) -> None:
    """The member claim names the member; the type claim sets human|agent; the same subject is one member."""
    token = sign(key, claims(sub="robo-1", member_type="agent"))
    first = (await oidc_gateway.client(token).get("/v1/members/me")).json()
    again = (await oidc_gateway.client(token).get("/v1/members/me")).json()
    assert first["name"] == "robo-1"
    assert first["type"] == "agent"
    assert first["id"] == again["id"]
    assert first["admin"] is False


async def test_group_claim_maps_to_memfed_groups_and_their_grants(oidc_gateway: Gateway, key: jwk.RSAKey) -> None:
    """A group named in the token's claim gives the grants of the memfed group of that name."""
    root = await oidc_gateway.root()
    group = (await oidc_gateway.admin.post("/v1/groups", json={"name": "sales"})).json()
    await oidc_gateway.grant(root["id"], f"group:{group['id']}", "read")
    member = oidc_gateway.client(sign(key, claims(sub="ana", groups=["sales", "unknown-group"])))
    assert (await member.get(f"/v1/memories/{root['id']}")).status_code == 200
    outsider = oidc_gateway.client(sign(key, claims(sub="bob", groups=[])))
    assert (await outsider.get(f"/v1/memories/{root['id']}")).status_code == 404
    # Leaving the group at the identity provider takes effect on the next request.
    former = oidc_gateway.client(sign(key, claims(sub="ana", groups=[])))
    assert (await former.get(f"/v1/memories/{root['id']}")).status_code == 404


async def test_bad_tokens_are_401_and_api_keys_still_work(oidc_gateway: Gateway, key: jwk.RSAKey) -> None:
    """Expired, wrong-audience and foreign-signed tokens are 401; an API key works beside OIDC."""
    other = rsa_key("gw-key")
    bad = [
        sign(key, claims(exp=1)),
        sign(key, claims(aud="someone-else")),
        sign(other, claims()),
    ]
    for token in bad:
        answer = await oidc_gateway.client(token).get("/v1/members/me")
        assert answer.status_code == 401
        assert answer.json()["error"]["type"] == "authentication_error"
    assert (await oidc_gateway.admin.get("/v1/members/me")).status_code == 200


async def test_an_unreachable_identity_provider_is_503_not_401(tmp_path: Path, key: jwk.RSAKey) -> None:
    """With no keys cached and the JWKS unreachable, a JWT gets 503: the token may be valid."""
    config = make_config(tmp_path, auth={"oidc": {
        "issuer": ISSUER, "audience": AUDIENCE, "jwks_url": "http://127.0.0.1:9/jwks"}})
    async with running_gateway(config, http_client=httpx.AsyncClient(trust_env=False)) as gw:
        answer = await gw.client(sign(key, claims())).get("/v1/members/me")
        assert answer.status_code == 503
        assert set(answer.json()["error"]) == {"type", "code", "message", "param", "detail"}
