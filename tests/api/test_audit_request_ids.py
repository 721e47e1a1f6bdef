"""Whose request id the decision log keeps: the gateway's own, with a client's `x-request-id` beside it."""

from __future__ import annotations

import json

import sqlalchemy as sa

from gateway.audit.store import entries_table
from tests.api._gateway import Gateway


async def _logged(gateway: Gateway) -> list[dict]:  # type: ignore[type-arg]
    await gateway.services.audit.flush()
    answer = await gateway.admin.get("/v1/audit", params={"limit": "1000", "operation": "memories.get"})
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


async def test_the_audit_id_is_the_gateway_s_own_and_the_client_s_is_kept_beside_it(gateway: Gateway) -> None:
    """A client's x-request-id is echoed and stored as client_request_id; the audit id is always minted
    by the gateway, so two requests sending the same id stay two requests in the log."""
    root = await gateway.root()
    sent = {"x-request-id": "client-trace-42"}
    first = await gateway.admin.get(f"/v1/memories/{root['id']}", headers=sent)
    second = await gateway.admin.get(f"/v1/memories/{root['id']}", headers=sent)
    plain = await gateway.admin.get(f"/v1/memories/{root['id']}")
    for answer in (first, second):
        assert answer.headers["x-request-id"] == "client-trace-42"
        assert answer.headers["memfed-request-id"].startswith("req_")
    assert first.headers["memfed-request-id"] != second.headers["memfed-request-id"]
    assert plain.headers["x-request-id"] == plain.headers["memfed-request-id"]
    logged = {e["request_id"]: e for e in await _logged(gateway)}
    assert "client-trace-42" not in logged
    for answer in (first, second):
        assert logged[answer.headers["memfed-request-id"]]["client_request_id"] == "client-trace-42"
    assert logged[plain.headers["memfed-request-id"]]["client_request_id"] is None


async def test_the_client_s_request_id_is_covered_by_the_chain(gateway: Gateway) -> None:
    """An edited client_request_id breaks verification; an export carries it and verifies offline."""
    from gateway.audit.chain import verify_lines

    root = await gateway.root()
    await gateway.admin.get(f"/v1/memories/{root['id']}", headers={"x-request-id": "trace-7"})
    await gateway.services.audit.flush()
    lines = [line async for line in gateway.services.audit.export_lines()]
    assert any(json.loads(line).get("client_request_id") == "trace-7" for line in lines)
    assert verify_lines(lines).ok
    async with gateway.services.store.engine.begin() as conn:
        await conn.execute(sa.update(entries_table).where(entries_table.c.client_request_id == "trace-7")
                           .values(client_request_id="trace-8"))
    report = await gateway.services.audit.verify()
    assert not report.ok and "edited" in (report.problem or "")
