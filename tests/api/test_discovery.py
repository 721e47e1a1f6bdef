"""Discovery, protocol versions, the error envelope and the OpenAPI document."""

from __future__ import annotations

from typing import Any

from tests.api._gateway import Gateway

ENVELOPE_KEYS = {"type", "code", "message", "param", "detail"}


async def test_discovery_needs_no_credentials_and_reports_memories(gateway: Gateway) -> None:
    """GET /v1/uhp answers without authentication and reports memories: true."""
    answer = await gateway.client(None).get("/v1/uhp")
    assert answer.status_code == 200
    body = answer.json()
    assert body["object"] == "uhp.discovery"
    assert body["capabilities"]["memories"] is True
    assert body["versions"] == ["2026-10-04"]
    assert body["default_version"] == "2026-10-04"
    assert answer.headers["uhp-version"] == "2026-10-04"


async def test_unsupported_version_is_refused_with_the_supported_list(gateway: Gateway) -> None:
    """An unsupported UHP-Version is 400 unsupported_protocol_version with detail.supported."""
    answer = await gateway.admin.get("/v1/members/me", headers={"UHP-Version": "2026-09-28"})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert set(error) == ENVELOPE_KEYS
    assert error["code"] == "unsupported_protocol_version"
    assert error["detail"]["supported"] == ["2026-10-04"]
    assert answer.headers["uhp-version"] == "2026-10-04"


async def test_supported_version_is_echoed_on_success_and_on_errors(gateway: Gateway) -> None:
    """Every response, errors included, carries the version actually used."""
    ok = await gateway.admin.get("/v1/members/me", headers={"UHP-Version": "2026-10-04"})
    missing = await gateway.admin.get("/v1/memories/hmem_nope", headers={"UHP-Version": "2026-10-04"})
    assert ok.headers["uhp-version"] == missing.headers["uhp-version"] == "2026-10-04"
    assert missing.status_code == 404


async def test_missing_or_wrong_credentials_are_401_in_the_envelope(gateway: Gateway) -> None:
    """No key and a wrong key are both 401 authentication_error."""
    for client in (gateway.client(None), gateway.client("mf_wrong"), gateway.client("not-a-key")):
        answer = await client.get("/v1/memories")
        assert answer.status_code == 401
        error = answer.json()["error"]
        assert set(error) == ENVELOPE_KEYS
        assert error["type"] == "authentication_error"


async def test_unknown_route_and_method_use_the_envelope(gateway: Gateway) -> None:
    """A route that does not exist, and a method a route does not take, still answer in the envelope."""
    nowhere = await gateway.admin.get("/v1/nowhere")
    wrong_method = await gateway.admin.patch("/v1/uhp")
    assert nowhere.status_code == 404
    assert wrong_method.status_code == 405
    for answer in (nowhere, wrong_method):
        assert set(answer.json()["error"]) == ENVELOPE_KEYS


async def test_openapi_describes_every_route_from_the_request_models(gateway: Gateway) -> None:
    """/openapi.json lists every route with its request schema, generated from the validating models."""
    doc = (await gateway.client(None).get("/openapi.json")).json()
    assert doc["openapi"].startswith("3.1")
    from gateway.server.app import endpoints

    for endpoint in endpoints():
        assert endpoint.method.lower() in doc["paths"][endpoint.path], endpoint.path
    create = doc["paths"]["/v1/memories"]["post"]
    schema_ref = create["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = doc["components"]["schemas"][schema_ref.rsplit("/", 1)[1]]
    assert schema["properties"]["name"]["maxLength"] == 300
    assert "name" in schema["required"]


async def test_providers_document_is_served(gateway: Gateway) -> None:
    """GET /v1/memories/providers serves the embedded provider's §10.2 document with its breaker state."""
    answer = await gateway.admin.get("/v1/memories/providers")
    assert answer.status_code == 200
    (local,) = answer.json()["data"]
    assert local["id"] == "local"
    for key in ("isolation", "derivation", "observe", "recall", "history", "revise", "forget", "erase",
                "prime", "consolidate", "queries", "types", "graph", "content"):
        assert key in local, key
    assert local["x.memfed"]["breaker"]["state"] == "closed"


async def test_providers_document_shows_recent_latency_and_failures(gateway: Gateway) -> None:
    """`x.memfed.recent` counts the calls made through the provider's breaker with their latency, and a
    failing call by its reason, so an operator sees a provider's recent health beside its breaker."""
    from adapters.base import ProviderUnavailable

    root = await gateway.root("Health")
    assert (await gateway.admin.post(f"/v1/memories/{root['id']}/recall", json={"text": "x"})).status_code == 200
    (local,) = (await gateway.admin.get("/v1/memories/providers")).json()["data"]
    recent = local["x.memfed"]["recent"]
    assert recent["calls"] >= 1 and recent["failures"] == 0 and recent["p50_ms"] is not None
    handle = gateway.services.providers.get("local")
    assert handle is not None

    async def down(*args: Any, **kwargs: Any) -> Any:
        raise ProviderUnavailable("down for the test")

    handle.provider.recall = down  # type: ignore[method-assign]
    answer = (await gateway.admin.post(f"/v1/memories/{root['id']}/recall", json={"text": "x"})).json()
    assert "provider:local:unavailable" in answer["degraded"]
    (local,) = (await gateway.admin.get("/v1/memories/providers")).json()["data"]
    recent = local["x.memfed"]["recent"]
    assert recent["failures"] == 1 and recent["failures_by_reason"] == {"unavailable": 1}
    assert recent["last_failure"]["reason"] == "unavailable"
