"""`/healthz` and `/readyz`: no credentials, one word per check, 503 while loading, draining or when the state
store does not answer, and no memory, member or key named in either."""

from __future__ import annotations

from pathlib import Path

import httpx
import jsonschema
from sqlalchemy.ext.asyncio import create_async_engine
from starlette.applications import Starlette

from gateway.api.health import DOCUMENTED, Readiness
from gateway.api.openapi import build as build_openapi
from gateway.base.config import from_mapping
from gateway.server.app import begin_serving, bootstrap_admin, create_app, end_serving, endpoints, open_services
from tests.e2e._process import free_port


def _client(app: Starlette, key: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memfed", headers=headers)


async def test_readiness_is_loading_then_ready_then_draining_and_only_ready_takes_requests(tmp_path: Path) -> None:
    """Before the services are in: /readyz 503 loading, any route 503 memfed_loading with Retry-After, /healthz
    200. Serving: /readyz 200 with every check ok. Draining: /readyz 503, routes 503 memfed_draining with
    Connection: close."""
    config = from_mapping({}).with_overrides(data_dir=tmp_path / "data")
    readiness = Readiness()
    app = create_app(config, readiness=readiness)
    async with _client(app) as client:
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        loading = await client.get("/readyz")
        assert loading.status_code == 503 and loading.json()["status"] == "loading"
        refused = await client.get("/v1/uhp")
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "memfed_loading"
        assert refused.headers["retry-after"] == "1"

        services = await open_services(config)
        try:
            await begin_serving(app, services)
            ready = await client.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json() == {"status": "ready", "checks": {
                "state_store": "ok", "tree": "ok", "journal": "ok", "coherence": "ok",
                "providers": {"local": "closed"}}}
            assert (await client.get("/v1/uhp")).status_code == 200

            await end_serving(app)
            draining = await client.get("/readyz")
            assert draining.status_code == 503 and draining.json()["status"] == "draining"
            late = await client.get("/v1/uhp")
            assert late.status_code == 503 and late.json()["error"]["code"] == "memfed_draining"
            assert late.headers["connection"] == "close"
            assert (await client.get("/healthz")).status_code == 200
        finally:
            await services.close()


async def test_readiness_is_503_when_the_state_store_does_not_answer(tmp_path: Path) -> None:
    """The state store's engine pointed at a port where nothing listens: /readyz 503 `unready`, the store's check
    `unreachable`, and no driver text in the answer."""
    config = from_mapping({}).with_overrides(data_dir=tmp_path / "data")
    services = await open_services(config)
    app = create_app(config, services=services)
    working = services.store.engine
    dead = create_async_engine(f"postgresql+asyncpg://memfed:pw@127.0.0.1:{free_port()}/none")
    try:
        async with _client(app) as client:
            services.store.engine = dead
            answer = await client.get("/readyz")
    finally:
        services.store.engine = working
        await dead.dispose()
        await services.close()
    assert answer.status_code == 503
    assert answer.json()["status"] == "unready" and answer.json()["checks"]["state_store"] == "unreachable"
    assert "refused" not in answer.text.lower() and "pw" not in answer.text


async def test_the_probes_need_no_credentials_and_name_nothing_of_the_tree_or_its_members(tmp_path: Path) -> None:
    """With a memory, a member and keys in the store, neither probe names any of them; both are answered to a
    caller with no key and to one with a wrong key alike, and both are in the OpenAPI document."""
    config = from_mapping({}).with_overrides(data_dir=tmp_path / "data")
    services = await open_services(config)
    try:
        admin_key = await bootstrap_admin(services.store, announce=False)
        app = create_app(config, services=services)
        async with _client(app, admin_key) as admin:
            memory = (await admin.post("/v1/memories", json={"name": "Project Nightingale"})).json()
            member = (await admin.post("/v1/members", json={"name": "carol-the-auditor", "type": "human"})).json()
            key = (await admin.post(f"/v1/members/{member['id']}/keys")).json()["key"]
            spec = (await admin.get("/openapi.json")).json()
        answers = []
        for credential in (None, "mf_not_a_key"):
            async with _client(app, credential) as client:
                answers += [await client.get("/healthz"), await client.get("/readyz")]
    finally:
        await services.close()
    assert [a.status_code for a in answers] == [200, 200, 200, 200]
    for answer in answers:
        for secret in ("Nightingale", memory["id"], "carol", member["id"], key, admin_key or "?"):
            assert secret not in answer.text
    assert {"/healthz", "/readyz"} <= set(spec["paths"])
    assert "security" not in spec["paths"]["/readyz"]["get"]


async def test_an_open_breaker_is_shown_but_leaves_the_gateway_ready(tmp_path: Path) -> None:
    """The embedded provider's breaker opened by failures in a row: /readyz still 200 (answers degrade; every
    replica shares the vendor, so taking them all out would make an outage of a degraded answer), and says
    `open` for that provider."""
    config = from_mapping({}).with_overrides(data_dir=tmp_path / "data")
    services = await open_services(config)
    try:
        breaker = services.providers["local"].breaker
        for _ in range(breaker.threshold):
            breaker.failed()
        async with _client(create_app(config, services=services)) as client:
            answer = await client.get("/readyz")
    finally:
        await services.close()
    assert answer.status_code == 200, answer.text
    assert answer.json()["checks"]["providers"] == {"local": "open"}


async def test_a_method_the_probes_do_not_take_is_405_naming_the_ones_they_do(tmp_path: Path) -> None:
    """TRACE or POST on /healthz or /readyz is 405 in the envelope with `Allow: GET, HEAD` (RFC 9110), even
    before the services are in: the readiness gate answers these paths itself."""
    app = create_app(from_mapping({}).with_overrides(data_dir=tmp_path / "data"), readiness=Readiness())
    async with _client(app) as client:
        for method in ("TRACE", "POST"):
            for path in ("/healthz", "/readyz"):
                answer = await client.request(method, path)
                assert answer.status_code == 405, (method, path)
                assert answer.headers.get("allow") == "GET, HEAD", (method, path)
                assert answer.json()["error"]["code"] == "memfed_method_not_allowed"


async def test_a_not_ready_answer_matches_the_readiness_schema_the_document_gives_503(tmp_path: Path) -> None:
    """/readyz while loading is 503 with the readiness body, not the error envelope: the document says so."""
    document = build_openapi([*endpoints(), *DOCUMENTED])
    schema = document["paths"]["/readyz"]["get"]["responses"]["503"]["content"]["application/json"]["schema"]
    app = create_app(from_mapping({}).with_overrides(data_dir=tmp_path / "data"), readiness=Readiness())
    async with _client(app) as client:
        loading = await client.get("/readyz")
    assert loading.status_code == 503
    jsonschema.validate(loading.json(), {**schema, "components": document["components"]})
