"""The metrics at `/metrics` (Prometheus text) and the spans: every figure the operator is promised is there,
labelled by route template and configured names, and no key (a vendor's, a member's, the admin's) nor any
memory id is in either after a run of requests through the embedded provider and a faked mem0."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.agent import outbox
from gateway.base.config import from_mapping
from gateway.server.app import bootstrap_admin, create_app, open_services
from gateway.telemetry import configure
from gateway.telemetry.export import Telemetry
from tests.adapters.fake_mem0 import FakeMem0

KEY_ENV = "MEMFED_TEST_METRICS_MEM0_KEY"


def _client(app: Any, key: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memfed", headers=headers)


@pytest.fixture
async def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[dict[str, Any]]:
    """A gateway with Prometheus metrics on, the local provider and a faked mem0 OSS (`m0`), after a run of
    requests: memories on both, a member with a grant, writes, recalls (one with m0 timing out), a 404."""
    fake = FakeMem0("oss")
    monkeypatch.setenv(KEY_ENV, fake.api_key or "")
    config = from_mapping({"telemetry": {"metrics": "prometheus"}, "providers": {"m0": {
        "adapter": "mem0", "variant": "oss", "base_url": fake.base_url, "api_key_env": KEY_ENV}}}
    ).with_overrides(data_dir=tmp_path / "data")
    spans = InMemorySpanExporter()
    configure("none", extra=spans)
    telemetry = Telemetry(config)
    services = await open_services(config, http_client=fake.client())
    try:
        admin_key = await bootstrap_admin(services.store, announce=False) or ""
        app = create_app(config, services=services, telemetry=telemetry)
        await telemetry.start(services, lambda: outbox.backlog(services))
        async with _client(app, admin_key) as admin:
            root = (await admin.post("/v1/memories", json={"name": "Company"})).json()["id"]
            vendor = (await admin.post("/v1/memories", json={"name": "Acme at mem0", "provider": "m0",
                                                             "parent_id": root})).json()["id"]
            member = (await admin.post("/v1/members", json={"name": "bot", "type": "agent"})).json()["id"]
            member_key = (await admin.post(f"/v1/members/{member}/keys")).json()["key"]
            await admin.post(f"/v1/memories/{root}/grants", json={"principal": f"member:{member}",
                                                                  "privileges": ["read", "write"]})
            async with _client(app, member_key) as bot:
                for memory in (root, vendor):
                    made = await bot.post(f"/v1/memories/{memory}/records", json={"content": "renews in March"})
                    assert made.status_code == 201, made.text
                first = await bot.post(f"/v1/memories/{root}/recall", json={"query": "renews in March"})
                assert first.status_code == 200
                fake.fail("timeout", times=2, when=lambda r: r.url.path == "/search")  # a read is tried twice
                slow = await bot.post(f"/v1/memories/{root}/recall", json={"query": "renews in March"})
                assert "provider:m0:timeout" in slow.json()["degraded"], slow.text
                assert (await bot.get("/v1/no/such/route/mem_abc")).status_code == 404
            async with _client(app) as anonymous:
                scraped = await anonymous.get("/metrics")
        yield {"scraped": scraped, "spans": spans.get_finished_spans(),
               "secrets": [fake.api_key or "?", member_key, admin_key], "ids": [root, vendor, member]}
    finally:
        await telemetry.close()
        await services.close()


def _series(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name + "{") or line.startswith(name + " ")]


async def test_metrics_cover_requests_providers_breakers_recall_audit_outbox_and_the_tree(run: dict[str, Any]) -> None:
    """Requests by route template and status with a latency histogram; provider calls by outcome; each
    breaker; the recall fan-out and its deadline misses; the audit backlog; the outbox backlog and oldest age;
    the tree's size. A path that matched no route is one `unmatched` series."""
    scraped = run["scraped"]
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    text = scraped.text
    recalls = [s for s in _series(text, "http_server_request_duration_seconds_count")
               if 'http_route="/v1/memories/{memory_id}/recall"' in s and 'http_response_status_code="200"' in s]
    assert recalls and float(recalls[0].rsplit(" ", 1)[1]) == 2
    assert _series(text, "http_server_request_duration_seconds_bucket")
    assert any('http_route="unmatched"' in s for s in _series(text, "http_server_request_duration_seconds_count"))
    calls = _series(text, "memfed_provider_call_duration_seconds_count")
    assert any('outcome="ok"' in s and 'provider="m0"' in s for s in calls), calls
    assert any('outcome="timeout"' in s and 'provider="m0"' in s for s in calls), calls
    assert any('provider="local"' in s for s in _series(text, "memfed_provider_breaker_state")), text
    assert _series(text, "memfed_recall_fanout_memories_count")
    misses = _series(text, "memfed_recall_deadline_misses_total")
    assert any('provider="m0"' in s and s.endswith(" 1.0") for s in misses), misses
    assert _series(text, "memfed_tree_memories")[0].endswith(" 2.0")
    for name in ("memfed_audit_backlog", "memfed_outbox_backlog", "memfed_outbox_oldest_age_seconds"):
        assert _series(text, name), name


async def test_no_key_nor_memory_id_is_in_the_metrics_or_the_spans(run: dict[str, Any]) -> None:
    """The mem0 key, the member's key and the admin's key appear in no metric and in no span's name, attribute
    or event; memory and member ids appear in no metric label (a path's ids would be a series each)."""
    text = run["scraped"].text
    spans = run["spans"]
    assert spans, "the run recorded no span"
    assert any(s.attributes.get("http.route") == "/v1/memories/{memory_id}/records" for s in spans)
    seen = [text]
    for span in spans:
        seen.append(span.name)
        seen.extend(str(v) for v in span.attributes.values())
        seen.extend(f"{e.name} {dict(e.attributes or {})}" for e in span.events)
    everything = "\n".join(seen)
    for secret in run["secrets"]:
        assert secret and secret not in everything
    for identifier in run["ids"]:
        assert identifier not in text
    assert not re.search(r"mf_[A-Za-z0-9_-]{20,}", everything)
