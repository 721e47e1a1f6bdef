"""First sign-in with an OIDC token under concurrency: one member, however many requests race for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from joserfc import jwk

from gateway.base.config import Config
from gateway.state import schema as t
from tests._postgres import fresh_schema
from tests.api._gateway import make_config, running_gateway
from tests.api.test_oidc import AUDIENCE, ISSUER, JwksServer, claims, jwks, rsa_key, sign


@pytest.fixture(scope="module")
def key() -> jwk.RSAKey:
    return rsa_key("first-sign-in")


@pytest.fixture
def idp(key: jwk.RSAKey) -> Iterator[JwksServer]:
    server = JwksServer()
    server.document = jwks(key)
    yield server
    server.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def config(request: pytest.FixtureRequest, tmp_path: Path, idp: JwksServer) -> AsyncIterator[Config]:
    oidc = {"oidc": {"issuer": ISSUER, "audience": AUDIENCE, "jwks_url": idp.url, "groups_claim": "groups"}}
    if request.param == "sqlite":
        yield make_config(tmp_path, auth=oidc)
        return
    async with fresh_schema("memfed_signin") as (_engine, schema):
        yield make_config(tmp_path, auth=oidc,
                          state={"url": "postgresql://postgres@127.0.0.1:5432/test", "schema": schema})


async def test_eight_concurrent_first_sign_ins_make_exactly_one_member(config: Config, key: jwk.RSAKey) -> None:
    """Eight requests racing with one token never seen before all succeed, as the same single member."""
    async with running_gateway(config, http_client=httpx.AsyncClient(trust_env=False)) as gw:
        await gw.admin.post("/v1/groups", json={"name": "sales"})
        token = sign(key, claims(sub="racer", groups=["sales"]))
        clients = [gw.client(token) for _ in range(8)]
        answers = await asyncio.gather(*(c.get("/v1/members/me") for c in clients))
        assert [a.status_code for a in answers] == [200] * 8, [a.text for a in answers]
        ids = {a.json()["id"] for a in answers}
        assert len(ids) == 1
        async with gw.services.store.engine.connect() as conn:
            rows = (await conn.execute(sa.select(t.members.c.id).where(t.members.c.name == "racer"))).all()
            in_group = (await conn.execute(sa.select(t.group_members.c.member_id))).scalars().all()
        assert [r.id for r in rows] == list(ids)
        assert in_group == list(ids)
        again = await gw.client(token).get("/v1/members/me")
        assert again.json()["id"] in ids
