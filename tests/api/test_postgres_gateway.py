"""Two gateways on one PostgreSQL with the embedded provider on it: what one writes the other serves."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from gateway.base.config import Config
from gateway.server.app import create_app, open_services
from tests._postgres import fresh_schema
from tests.api._gateway import make_config, running_gateway
from tests.api.migration_data import aliases, comparable, export_lines, held_by, migrate, seed

STATE_URL = "postgresql://postgres@127.0.0.1:5432/test"


@asynccontextmanager
async def admin_on_second_gateway(config: Config, admin_key: str) -> AsyncIterator[httpx.AsyncClient]:
    """Another gateway on the database a first one set up, and a client acting with the first's admin key."""
    services = await open_services(config)
    app = create_app(config, services=services)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memfed",
                               headers={"Authorization": f"Bearer {admin_key}"})
    try:
        yield client
    finally:
        await client.aclose()
        await services.close()


def configs(tmp_path: Path, state_schema: str, records_schema: str) -> tuple[Config, Config]:
    """Instance A and B: one state, one records schema, each its own data directory."""
    raw = {
        "state": {"url": STATE_URL, "schema": state_schema},
        "providers": {"shared": {"adapter": "postgres", "schema": records_schema}},
        "default": {"provider": "shared"},
    }
    return make_config(tmp_path / "a", **raw), make_config(tmp_path / "b", **raw)


@pytest.mark.postgres
async def test_a_record_written_through_one_gateway_is_read_revised_and_recalled_through_the_other(
        tmp_path: Path) -> None:  # fmt: skip
    """A writes a record into a memory on the postgres provider; B (its own data dir, the same database)
    gets it, revises it, and A's next recall finds the revision; a record B forgets reads forgotten on A."""
    async with fresh_schema("pgstate") as (_e1, state_schema), fresh_schema("pgrec") as (_e2, records_schema):
        config_a, config_b = configs(tmp_path, state_schema, records_schema)
        async with running_gateway(config_a) as gw_a, admin_on_second_gateway(config_b, gw_a.admin_key) as b:
            memory = await gw_a.root("Accounts")
            assert memory["provider"] == "shared"
            written = await gw_a.admin.post(f"/v1/memories/{memory['id']}/records",
                                            json={"content": "Acme renews in March.", "title": "Acme"})
            assert written.status_code == 201, written.text
            record_id = written.json()["id"]

            on_b = await b.get(f"/v1/memories/{memory['id']}/records/{record_id}")
            assert on_b.status_code == 200, on_b.text
            assert on_b.json()["content"][0]["text"] == "Acme renews in March."

            revised = await b.patch(f"/v1/memories/{memory['id']}/records/{record_id}",
                                    json={"content": "Acme renews in April, not March."})
            assert revised.status_code == 200, revised.text
            recalled = await gw_a.admin.post(f"/v1/memories/{memory['id']}/recall", json={"text": "April"})
            assert recalled.status_code == 200, recalled.text
            assert [h["record"]["id"] for h in recalled.json()["results"]] == [record_id]
            assert recalled.json()["results"][0]["record"]["version"] == 2

            other = await b.post(f"/v1/memories/{memory['id']}/records", json={"content": "Globex is a lead."})
            assert other.status_code == 201, other.text
            forgotten = await b.delete(f"/v1/memories/{memory['id']}/records/{other.json()['id']}")
            assert forgotten.status_code in (200, 204), forgotten.text
            listed = await gw_a.admin.get(f"/v1/memories/{memory['id']}/records")
            assert [r["id"] for r in listed.json()["data"]] == [record_id]


async def test_the_postgres_provider_needs_a_postgresql_url(tmp_path: Path) -> None:
    """Named without a url on a gateway whose state is SQLite, the provider is refused at start with one
    line naming it, not opened on the wrong database."""
    from gateway.base.config import ConfigError

    config = make_config(tmp_path, providers={"shared": {"adapter": "postgres"}})
    with pytest.raises(ConfigError, match=r"providers\.shared: .*postgresql"):
        await open_services(config)


@pytest.mark.postgres
async def test_a_memory_moves_from_local_to_postgres_and_back_with_every_version(tmp_path: Path) -> None:
    """local -> postgres -> local: after each swap the memory's export equals the original, version for
    version (writers, times, statuses, files, forgotten records), references on the new ids."""
    async with fresh_schema("pgrec") as (_engine, records_schema):
        config = make_config(tmp_path, providers={
            "shared": {"adapter": "postgres", "url": STATE_URL, "schema": records_schema}})
        async with running_gateway(config) as gw:
            seeded = await seed(gw)
            before = comparable(await export_lines(gw.admin, seeded.memory_id))
            there = await migrate(gw, seeded.memory_id, to="shared")
            assert there.status_code == 200, there.text
            assert len(await held_by(gw, "shared", seeded.memory_id)) == 4
            on_pg = await aliases(gw, seeded.memory_id)
            assert comparable(await export_lines(gw.admin, seeded.memory_id),
                              id_map={new: old for old, new in on_pg.items()}) == before
            back = await migrate(gw, seeded.memory_id, to="local")
            assert back.status_code == 200, back.text
            final = await aliases(gw, seeded.memory_id)
            original_of = {new: old for old, new in final.items() if old in seeded.records.values()}
            assert comparable(await export_lines(gw.admin, seeded.memory_id), id_map=original_of) == before


@pytest.mark.postgres
async def test_a_recall_at_the_root_ranks_branches_on_local_and_postgres_together(tmp_path: Path) -> None:
    """A tree whose branches live on local and on postgres, recalled from the root: one ranking, each
    result naming the memory it came from."""
    async with fresh_schema("pgrec") as (_engine, records_schema):
        config = make_config(tmp_path, providers={
            "shared": {"adapter": "postgres", "url": STATE_URL, "schema": records_schema}})
        async with running_gateway(config) as gw:
            root = await gw.root("Company")
            on_local = await gw.child(gw.admin, root["id"], "Sales", provider="local")
            on_pg = await gw.child(gw.admin, root["id"], "Support", provider="shared")
            for memory, text in ((on_local, "Acme renews in March."), (on_pg, "Acme asked about the renewal.")):
                made = await gw.admin.post(f"/v1/memories/{memory['id']}/records", json={"content": text})
                assert made.status_code == 201, made.text
            recalled = await gw.admin.post(f"/v1/memories/{root['id']}/recall", json={"text": "Acme"})
            assert recalled.status_code == 200, recalled.text
            body = recalled.json()
            named = sorted(h["record"]["memory_id"] for h in body["results"])
            assert named == sorted([on_local["id"], on_pg["id"]])
            assert not [d for d in body["degraded"] if d.startswith("provider:")]
            scores = [h["score"] for h in body["results"]]
            assert scores == sorted(scores, reverse=True)


def test_state_on_postgresql_with_the_sqlite_default_is_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    """`[state]` on PostgreSQL and `[default] provider` still the SQLite file: one warning naming the
    provider and the way out; with a postgres default, or state on SQLite, none."""
    from gateway.base.config import from_mapping
    from gateway.federation.preflight import warn_unshared_default

    state = {"url": STATE_URL}
    caplog.set_level(logging.WARNING, logger="memfed.startup")
    assert warn_unshared_default(from_mapping({"state": state}))
    said = [r.getMessage() for r in caplog.records if r.name == "memfed.startup"]
    assert len(said) == 1 and "local" in said[0] and 'adapter = "postgres"' in said[0]
    shared = {"providers": {"shared": {"adapter": "postgres"}}, "default": {"provider": "shared"}}
    assert not warn_unshared_default(from_mapping({"state": state, **shared}))
    assert not warn_unshared_default(from_mapping({}))


def test_a_postgres_write_settles_when_its_call_ends() -> None:
    """Its write commits before the call returns, so a write whose outcome was unknown and is not found is
    not written: write_settle defaults to 0, as for local, not the vendors' 30 s."""
    from gateway.base.config import from_mapping

    config = from_mapping({"providers": {"shared": {"adapter": "postgres"}}})
    assert config.providers["shared"].settle_seconds() == 0.0
    assert config.providers["local"].settle_seconds() == 0.0
