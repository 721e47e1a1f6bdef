"""Two instances on one database: what one changes, the other decides from on its very next request."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from gateway.base.config import Config
from gateway.server.app import create_app, open_services
from gateway.state.store import StateStore
from tests._postgres import PG_URL, fresh_schema
from tests.adapters.fake_mem0 import FakeMem0
from tests.api._gateway import make_config, running_gateway


@asynccontextmanager
async def two_stores(kind: str, tmp_path: Path) -> AsyncIterator[tuple[StateStore, StateStore]]:
    if kind == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path}/state.sqlite3"
        a = await StateStore.open(url)
        b = await StateStore.open(url)
        try:
            yield a, b
        finally:
            await a.close()
            await b.close()
        return
    async with fresh_schema("coherence") as (_engine, schema):
        a = await StateStore.open(PG_URL, search_path=schema)
        b = await StateStore.open(PG_URL, search_path=schema)
        try:
            yield a, b
        finally:
            await a.close()
            await b.close()


KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_key_made_or_revoked_on_one_instance_counts_on_the_other_at_once(kind: str, tmp_path: Path) -> None:
    """A key created on A works on B's next lookup, and once A revokes it, B refuses it at once."""
    async with two_stores(kind, tmp_path) as (a, b):
        member = await a.create_member("Ann", "human")
        key_id, secret = await a.create_key(member.id)
        await b.catch_up()
        found = b.member_for_key(secret)
        assert found is not None and found.id == member.id
        assert await a.revoke_key(member.id, key_id)
        await b.catch_up()
        assert b.member_for_key(secret) is None
        assert b.keys_of(member.id) == []


@pytest.mark.parametrize("kind", KINDS)
async def test_group_membership_changes_on_one_instance_are_seen_by_the_other(kind: str, tmp_path: Path) -> None:
    """Joining and leaving a group through A changes B's idea of the member's groups on its next look."""
    async with two_stores(kind, tmp_path) as (a, b):
        member = await a.create_member("Ann", "human")
        group = await a.create_group("ops")
        await a.add_to_group(group.id, member.id)
        await b.catch_up()
        assert b.groups_of(member.id) == (group.id,)
        assert b.group_by_name("ops") is not None
        await a.remove_from_group(group.id, member.id)
        await b.catch_up()
        assert b.groups_of(member.id) == ()
        assert b.members_of(group.id) == ()


@pytest.mark.parametrize("kind", KINDS)
async def test_tree_and_grant_changes_on_one_instance_reach_the_other(kind: str, tmp_path: Path) -> None:
    """Create, restrict, move, grant, revoke and delete on A: after each, B's tree is A's tree."""
    async with two_stores(kind, tmp_path) as (a, b):
        owner = await a.create_member("Owner", "human", is_admin=True)

        async def same() -> None:
            await b.catch_up()
            for memory_id in set(a.tree.all_ids()) | set(b.tree.all_ids()):
                assert b.tree.get(memory_id) == a.tree.get(memory_id)
                assert sorted(g.id for g in b.tree.grants_on(memory_id)) == sorted(
                    g.id for g in a.tree.grants_on(memory_id))

        root = await a.create_memory(name="Root", description="", parent_id=None, restricted=False,
                                     provider="default", created_by=owner.id)
        left = await a.create_memory(name="L", description="", parent_id=root.id, restricted=False,
                                     provider="default", created_by=owner.id)
        right = await a.create_memory(name="R", description="", parent_id=root.id, restricted=False,
                                      provider="default", created_by=owner.id)
        await same()
        assert sorted(b.tree.children_of(root.id)) == sorted(a.tree.children_of(root.id))
        await a.update_memory(left.id, restricted=True)
        await same()
        assert b.tree.is_restricted(left.id)
        await a.update_memory(left.id, parent_id=right.id)
        await same()
        assert b.tree.parent_of(left.id) == right.id
        grant = await a.add_grant(right.id, "member:someone", frozenset({"read"}))
        await same()
        assert b.tree.grant(grant.id) is not None
        await a.remove_grant(grant.id)
        await same()
        assert b.tree.grant(grant.id) is None
        await a.delete_subtree(right.id)
        await same()
        assert not b.tree.exists(left.id) and not b.tree.exists(right.id)
        assert sorted(b.tree.children_of(root.id)) == sorted(a.tree.children_of(root.id))


async def test_an_instance_behind_every_kept_change_reloads_everything(tmp_path: Path) -> None:
    """When the changes after B's mark were pruned, B reloads the whole state rather than miss them."""
    async with two_stores("sqlite", tmp_path) as (a, b):
        member = await a.create_member("Ann", "human")
        _key, secret = await a.create_key(member.id)
        async with a.engine.begin() as conn:
            await conn.execute(sa.text("DELETE FROM state_changes"))
        await a.create_group("marker")  # one change left, far past B's mark
        await b.catch_up()
        found = b.member_for_key(secret)
        assert found is not None and found.id == member.id


@pytest.mark.postgres
async def test_a_key_revoked_through_one_gateway_is_refused_by_the_other_on_its_next_request(
        tmp_path: Path) -> None:  # fmt: skip
    """Two gateways on one PostgreSQL: A revokes a member's key, and B's very next request with it is 401;
    a grant revoked on A no longer lets B read."""
    async with fresh_schema("coherence") as (_engine, schema):
        state = {"url": "postgresql://postgres@127.0.0.1:5432/test", "schema": schema}
        async with running_gateway(make_config(tmp_path / "a", state=state)) as gw_a, \
                second_gateway(make_config(tmp_path / "b", state=state)) as on_b:
            made = await gw_a.admin.post("/v1/members", json={"name": "Ann", "type": "human"})
            member_id = made.json()["id"]
            key = (await gw_a.admin.post(f"/v1/members/{member_id}/keys")).json()
            root = await gw_a.root("Shared")
            grant = await gw_a.grant(root["id"], f"member:{member_id}", "read")
            ann_on_b = on_b(key["key"])
            assert (await ann_on_b.get(f"/v1/memories/{root['id']}")).status_code == 200
            revoked = await gw_a.admin.delete(f"/v1/memories/{root['id']}/grants/{grant['id']}")
            assert revoked.status_code in (200, 204), revoked.text
            assert (await ann_on_b.get(f"/v1/memories/{root['id']}")).status_code in (403, 404)
            gone = await gw_a.admin.delete(f"/v1/members/{member_id}/keys/{key['id']}")
            assert gone.status_code in (200, 204), gone.text
            assert (await ann_on_b.get("/v1/memories")).status_code == 401


@asynccontextmanager
async def second_gateway(config: Config, http_client: httpx.AsyncClient | None = None,
                         ) -> AsyncIterator[Callable[[str], httpx.AsyncClient]]:
    """Another gateway on a database a first one set up (so it bootstraps no admin): a client per key."""
    services = await open_services(config, http_client=http_client)
    app = create_app(config, services=services)
    clients: list[httpx.AsyncClient] = []

    def client(key: str) -> httpx.AsyncClient:
        made = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memfed",
                                 headers={"Authorization": f"Bearer {key}"})
        clients.append(made)
        return made

    try:
        yield client
    finally:
        for made in clients:
            await made.aclose()
        await services.close()


async def test_applying_another_instances_change_records_the_coherence_lag(tmp_path: Path) -> None:
    """The time from a change written on A to B applying it is a `memfed.coherence.lag` measurement."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from gateway.telemetry import metrics

    reader = InMemoryMetricReader()
    metrics.use(MeterProvider(metric_readers=[reader]))
    try:
        async with two_stores("sqlite", tmp_path) as (a, b):
            await a.create_member("Ann", "human")
            await b.catch_up()
        data = reader.get_metrics_data()
        assert data is not None
        lags = [point for rm in data.resource_metrics for sm in rm.scope_metrics for metric in sm.metrics
                if metric.name == "memfed.coherence.lag" for point in metric.data.data_points]
        assert lags and getattr(lags[0], "count", None) == 1
    finally:
        metrics.use(None)


class RoundRobin:
    """A client that sends each request to the next gateway in turn, as a load balancer would."""

    def __init__(self, clients: list[httpx.AsyncClient]) -> None:
        self.clients, self.turn = clients, 0

    def _next(self) -> httpx.AsyncClient:
        self.turn += 1
        return self.clients[self.turn % len(self.clients)]

    async def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self._next().post(path, **kwargs)

    async def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self._next().get(path, **kwargs)

    async def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self._next().delete(path, **kwargs)


@pytest.mark.postgres
async def test_two_gateways_behind_a_round_robin_client_act_as_one(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's example: two gateways on one PostgreSQL and one mem0 behind a client that alternates
    between them. Every step lands on the other gateway than the one before, and each sees the last."""
    fake = FakeMem0("oss")
    monkeypatch.setenv("MEMFED_TEST_MEM0_KEY", fake.api_key or "")
    async with fresh_schema("roundrobin") as (_engine, schema):
        raw = {"state": {"url": "postgresql://postgres@127.0.0.1:5432/test", "schema": schema},
               "providers": {"m0": {"adapter": "mem0", "variant": "oss", "base_url": fake.base_url,
                                    "api_key_env": "MEMFED_TEST_MEM0_KEY"}},
               "default": {"provider": "m0"}}
        async with running_gateway(make_config(tmp_path / "a", **raw), http_client=fake.client()) as gw_a, \
                second_gateway(make_config(tmp_path / "b", **raw), http_client=fake.client()) as on_b:
            admin = RoundRobin([gw_a.admin, on_b(gw_a.admin_key)])
            member = (await admin.post("/v1/members", json={"name": "Ann", "type": "agent"})).json()
            key = (await admin.post(f"/v1/members/{member['id']}/keys")).json()
            root = (await admin.post("/v1/memories", json={"name": "Shared"})).json()
            team = (await admin.post("/v1/memories", json={"name": "Team", "parent_id": root["id"]})).json()
            grant = await admin.post(f"/v1/memories/{team['id']}/grants",
                                     json={"principal": f"member:{member['id']}", "privileges": ["read", "write"]})
            assert grant.status_code == 201, grant.text
            ann = RoundRobin([gw_a.client(key["key"]), on_b(key["key"])])
            made = await ann.post(f"/v1/memories/{team['id']}/records", json={"content": "The launch is on Friday."})
            assert made.status_code == 201, made.text
            read = await ann.get(f"/v1/memories/{team['id']}/records/{made.json()['id']}")
            assert read.status_code == 200 and read.json()["id"] == made.json()["id"]
            recalled = await ann.post(f"/v1/memories/{team['id']}/recall", json={"query": "launch"})
            assert [hit["record"]["id"] for hit in recalled.json()["results"]] == [made.json()["id"]]
            assert (await admin.delete(f"/v1/memories/{team['id']}/grants/{grant.json()['id']}")).status_code in (
                200, 204)
            for _ in range(2):  # on each gateway in turn
                assert (await ann.get(f"/v1/memories/{team['id']}")).status_code in (403, 404)
