"""/openapi.json says what the server does: statuses, media types, bodies, parameter types, limits."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from gateway.api.openapi import build
from gateway.server.app import endpoints
from tests.adapters.fake_plugin import plugin_options
from tests.api._gateway import Gateway, make_config, running_gateway

DOCUMENT = build(endpoints())


def _operation(method: str, path: str) -> dict[str, Any]:
    operation: dict[str, Any] = DOCUMENT["paths"][path][method.lower()]
    return operation


def _body_schema(method: str, path: str) -> dict[str, Any]:
    """The request body's schema, resolved against the document's components."""
    ref = _operation(method, path)["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    name = ref.rsplit("/", 1)[-1]
    return {**DOCUMENT["components"]["schemas"][name], "components": DOCUMENT["components"]}


def _valid(schema: dict[str, Any], value: Any) -> bool:
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return False
    return True


def test_success_statuses_are_the_ones_the_routes_answer() -> None:
    """observe is 201 or 202, a turn 200, 201 or 202, defining a named query 200 (replaced) or 201 (new)."""
    assert {"201", "202"} <= set(_operation("POST", "/v1/memories/{memory_id}/observe")["responses"])
    assert {"200", "201", "202"} <= set(_operation("POST", "/v1/harnesses/{harness_id}/turns")["responses"])
    assert {"200", "201"} <= set(_operation("PUT", "/v1/memories/{memory_id}/queries/{name}")["responses"])


def test_media_types_are_the_real_ones() -> None:
    """An export is NDJSON, a part's bytes come in their own type, an import takes NDJSON."""
    export = _operation("GET", "/v1/memories/{memory_id}/export")["responses"]["200"]["content"]
    assert list(export) == ["application/x-ndjson"]
    content = _operation("GET", "/v1/memories/{memory_id}/records/{record_id}/content/{index}")
    assert list(content["responses"]["200"]["content"]) == ["*/*"]
    index = next(p for p in content["parameters"] if p["name"] == "index")
    assert index["schema"]["type"] == "integer" and index["schema"]["minimum"] == 0
    imported = _operation("POST", "/v1/memories/{memory_id}/import")["requestBody"]["content"]
    assert list(imported) == ["application/x-ndjson"]


@pytest.mark.parametrize("endpoint", [e for e in endpoints() if not e.public], ids=lambda e: e.operation)
def test_every_route_lists_the_errors_it_can_answer(endpoint: Any) -> None:
    """No `default` catch-all: each route names its statuses, in the envelope, and a body route its 413,
    415 and 422."""
    responses = _operation(endpoint.method, endpoint.path)["responses"]
    assert "default" not in responses
    assert {"400", "401", "403", "404", "429", "503"} <= set(responses)
    if endpoint.body is not None:
        assert {"413", "415", "422"} <= set(responses)
    assert responses["401"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}


def test_limits_json_schema_can_state_are_in_the_schemas() -> None:
    """What the models refuse and JSON Schema can say, the schema refuses too: a recall without a signal,
    a signal given as null, a record with neither title nor content, an unknown part type, a principal
    without its kind, an empty update, a null name, an empty record id."""
    recall = _body_schema("POST", "/v1/memories/{memory_id}/recall")
    assert not _valid(recall, {}) and not _valid(recall, {"query": None}) and _valid(recall, {"query": "q"})
    assert not _valid(recall, {"filters": {"field": "colour"}})
    remember = _body_schema("POST", "/v1/memories/{memory_id}/records")
    assert not _valid(remember, {"type": "note"}) and _valid(remember, {"content": "x"})
    assert not _valid(remember, {"content": [{"type": "pdf"}]})
    grant = _body_schema("POST", "/v1/memories/{memory_id}/grants")
    assert not _valid(grant, {"principal": "alice", "privileges": ["read"]})
    update = _body_schema("PUT", "/v1/memories/{memory_id}")
    assert not _valid(update, {}) and not _valid(update, {"name": None}) and _valid(update, {"name": "n"})
    erase = _body_schema("POST", "/v1/memories/{memory_id}/erase")
    assert not _valid(erase, {"record_ids": [""]})
    observe = _body_schema("POST", "/v1/memories/{memory_id}/observe")
    assert not _valid(observe, {"content": "x", "episodes": [{"content": "y"}]})


def _answer_schema(method: str, path: str, status: str = "200") -> dict[str, Any]:
    content = _operation(method, path)["responses"][status]["content"]["application/json"]["schema"]
    assert "$ref" in content, (method, path, content)  # described by a model, not a bare object
    return {**content, "components": DOCUMENT["components"]}


async def test_answers_match_their_described_schemas(gateway: Gateway) -> None:
    """The answers of the record, memory, recall and erase routes validate against the success schemas
    the document gives them (built from gateway/api/responses.py)."""
    memory = await gateway.root(description="d")
    await gateway.child(gateway.admin, memory["id"], "Below")
    upload = (await gateway.admin.post("/v1/files", files={"file": ("a.txt", b"x", "text/plain")})).json()
    record = (await gateway.admin.post(f"/v1/memories/{memory['id']}/records", json={
        "title": "t", "content": [{"type": "text", "text": "hello"}, {"type": "file", "file": {"id": upload["id"]}},
                                  {"type": "x.note", "body": "own key"}],
        "attributes": {"k": 1}, "time": {"valid_from": "2026-01-01T00:00:00Z"}})).json()
    records, one = f"/v1/memories/{memory['id']}/records", f"/v1/memories/{memory['id']}/records/{record['id']}"
    checks = [
        ("GET", "/v1/memories/{memory_id}", await gateway.admin.get(f"/v1/memories/{memory['id']}")),
        ("GET", "/v1/memories", await gateway.admin.get("/v1/memories")),
        ("GET", "/v1/memories/{memory_id}/records", await gateway.admin.get(records)),
        ("GET", "/v1/memories/{memory_id}/records/{record_id}", await gateway.admin.get(one)),
        ("GET", "/v1/memories/{memory_id}/records/{record_id}/history", await gateway.admin.get(one + "/history")),
        ("POST", "/v1/memories/{memory_id}/recall",
         await gateway.admin.post(f"/v1/memories/{memory['id']}/recall", json={"query": "hello"})),
        ("POST", "/v1/memories/{memory_id}/erase",
         await gateway.admin.post(f"/v1/memories/{memory['id']}/erase", json={"record_ids": [record["id"]]})),
    ]
    for method, path, answer in checks:
        assert answer.status_code == 200, (path, answer.text)
        jsonschema.validate(answer.json(), _answer_schema(method, path))
    member = (await gateway.admin.post("/v1/members", json={"name": "m", "type": "agent"})).json()
    group = (await gateway.admin.post("/v1/groups", json={"name": "g"})).json()
    kept = (await gateway.admin.post("/v1/files", files={"file": ("b.txt", b"y", "text/plain")})).json()
    more = [
        ("POST", "/v1/members/{member_id}/keys", "201", await gateway.admin.post(f"/v1/members/{member['id']}/keys")),
        ("GET", "/v1/members/{member_id}", "200", await gateway.admin.get(f"/v1/members/{member['id']}")),
        ("GET", "/v1/members/me", "200", await gateway.admin.get("/v1/members/me")),
        ("PUT", "/v1/groups/{group_id}/members/{member_id}", "200",
         await gateway.admin.put(f"/v1/groups/{group['id']}/members/{member['id']}")),
        ("POST", "/v1/memories/{memory_id}/grants", "201", await gateway.admin.post(
            f"/v1/memories/{memory['id']}/grants", json={"principal": f"group:{group['id']}", "privileges": ["read"]})),
        ("GET", "/v1/memories/{memory_id}/grants", "200",
         await gateway.admin.get(f"/v1/memories/{memory['id']}/grants")),
        ("GET", "/v1/files/{file_id}", "200", await gateway.admin.get(f"/v1/files/{kept['id']}")),
    ]
    harness = await gateway.admin.post("/v1/harnesses", json={"name": "h", "agent_member_id": member["id"]})
    more += [
        ("POST", "/v1/harnesses", "201", harness),
        ("GET", "/v1/harnesses", "200", await gateway.admin.get("/v1/harnesses")),
        ("POST", "/v1/memories/{memory_id}/snapshots", "201",
         await gateway.admin.post(f"/v1/memories/{memory['id']}/snapshots", json={"name": "s"})),
        ("GET", "/v1/memories/{memory_id}/snapshots", "200",
         await gateway.admin.get(f"/v1/memories/{memory['id']}/snapshots")),
        ("DELETE", "/v1/harnesses/{harness_id}", "200",
         await gateway.admin.delete(f"/v1/harnesses/{harness.json()['id']}")),
    ]
    for method, path, status, answer in more:
        assert str(answer.status_code) == status, (path, answer.text)
        jsonschema.validate(answer.json(), _answer_schema(method, path, status))
    recall = next(a for m, p, a in checks if p.endswith("/recall")).json()
    assert recall["results"] and recall["children"]  # the schema was checked on a non-empty answer


@pytest.mark.parametrize("endpoint", [e for e in endpoints()
                                      if e.media == "application/json" and e.path != "/openapi.json"],
                         ids=lambda e: e.operation)
def test_every_json_answer_is_described_by_a_model(endpoint: Any) -> None:
    """No success response is a bare `{"type": "object"}`: each JSON route declares the model of its answer
    (for every success status it answers), so a client and the fuzzer know what comes back."""
    for status in (endpoint.status, *endpoint.also):
        _answer_schema(endpoint.method, endpoint.path, str(status))


class _DerivesLater:
    """The embedded provider declaring background derivation: its observe answers 202 with a job."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def capabilities(self) -> Any:
        return replace(self.inner.capabilities(), derivation="background", observe_answers="job")


NAMED = {"description": "By type.", "params": {"type": "object", "properties": {"kind": {"type": "string"}}},
         "requires": "read", "language": "sql", "body": "SELECT * FROM records WHERE (:kind IS NULL OR type = :kind)"}
TASK = {"type": "x.task", "title": "Renew", "content": "Send the offer.",
        "attributes": {"status": "open", "due": "2026-10-09", "assignee": "Dana"}}


async def _agent_surface_answers(gw: Gateway, memory: str) -> list[tuple[str, str, str, httpx.Response]]:
    a, m = gw.admin, f"/v1/memories/{memory}"
    member = (await a.post("/v1/members", json={"name": "bot", "type": "agent"})).json()
    await gw.grant(memory, f"member:{member['id']}", "read", "write")
    harness = (await a.post("/v1/harnesses", json={"name": "h", "agent_member_id": member["id"]})).json()
    h = f"/v1/harnesses/{harness['id']}"
    out = [
        ("GET", "/v1/harnesses/{harness_id}/memories", "200", await a.get(h + "/memories")),
        ("POST", "/v1/harnesses/{harness_id}/turns", "200", await a.post(h + "/turns", json={"parts": [
            {"type": "text", "text": "q", "role": "user"}]})),
        ("PUT", "/v1/harnesses/{harness_id}/memories", "200",
         await a.put(h + "/memories", json={"default_memory_id": memory, "observe": True})),
        ("GET", "/v1/harnesses/{harness_id}/prime", "200", await a.get(h + "/prime")),
        ("POST", "/v1/harnesses/{harness_id}/turns", "201", await a.post(h + "/turns", json={"parts": [
            {"type": "text", "text": "q", "role": "user"}]})),
        ("GET", "/v1/memories/{memory_id}/prime", "200", await a.get(m + "/prime")),
        ("POST", "/v1/memories/{memory_id}/observe", "201", await a.post(m + "/observe", json={"content": "x"})),
        ("PUT", "/v1/memories/{memory_id}/queries/{name}", "201", await a.put(m + "/queries/by", json=NAMED)),
        ("PUT", "/v1/memories/{memory_id}/queries/{name}", "200", await a.put(m + "/queries/by", json=NAMED)),
        ("GET", "/v1/memories/{memory_id}/queries", "200", await a.get(m + "/queries")),
        ("POST", "/v1/memories/{memory_id}/queries/{name}", "200", await a.post(m + "/queries/by", json={})),
        ("POST", "/v1/memories/{memory_id}/query", "200", await a.post(m + "/query", json={
            "language": "sql", "statement": "SELECT type, count(*) AS n FROM records GROUP BY type"})),
        ("DELETE", "/v1/memories/{memory_id}/queries/{name}", "200", await a.delete(m + "/queries/by")),
    ]
    run = await a.post(m + "/consolidations", json={})
    r = f"{m}/consolidations/{run.json()['id']}"
    out += [
        ("POST", "/v1/memories/{memory_id}/consolidations", "201", run),
        ("GET", "/v1/memories/{memory_id}/consolidations", "200", await a.get(m + "/consolidations")),
        ("GET", "/v1/memories/{memory_id}/consolidations/{run_id}", "200", await a.get(r)),
        ("GET", "/v1/memories/{memory_id}/consolidations/{run_id}/changes", "200", await a.get(r + "/changes")),
        ("POST", "/v1/memories/{memory_id}/consolidations/{run_id}/revert", "201", await a.post(r + "/revert")),
    ]
    handle = gw.services.providers.get("local")
    assert handle is not None
    inner, handle.provider = handle.provider, _DerivesLater(handle.provider)
    try:
        later = await a.post(m + "/observe", json={"content": "later"})
        job = await a.get(f"{m}/jobs/{later.json()['job']['id']}")
    finally:
        handle.provider = inner
    return [*out, ("POST", "/v1/memories/{memory_id}/observe", "202", later),
            ("GET", "/v1/memories/{memory_id}/jobs/{job_id}", "200", job)]


async def test_every_other_answer_matches_its_described_schema(tmp_path: Path) -> None:
    """The answers of the writes, deletes, graph, types and operations, discovery, access, audit, migration,
    import, observe (201 and 202) and jobs, prime, harness, named and free queries and consolidation routes
    validate against the success schemas the document gives them."""
    async with running_gateway(make_config(tmp_path, providers={"archive": {"adapter": "local"}})) as gw:
        a = gw.admin
        memory = (await gw.root(description="d"))["id"]
        below = await gw.child(a, memory, "Below")
        m = f"/v1/memories/{memory}"
        made = await a.post(m + "/records", json={"content": "hello"})
        task = (await a.post(m + "/records", json=TASK)).json()
        me = (await a.get("/v1/members/me")).json()
        member = (await a.post("/v1/members", json={"name": "m", "type": "human"})).json()
        grant = (await a.post(m + "/grants", json={"principal": f"member:{member['id']}", "privileges": ["read"]}))
        one = f"{m}/records/{made.json()['id']}"
        answers = [
            ("POST", "/v1/memories/{memory_id}/records", "201", made),
            ("PATCH", "/v1/memories/{memory_id}/records/{record_id}", "200",
             await a.patch(one, json={"content": "h2"})),
            ("GET", "/v1/uhp", "200", await a.get("/v1/uhp")),
            ("GET", "/v1/memories/providers", "200", await a.get("/v1/memories/providers")),
            ("GET", "/v1/memories/types", "200", await a.get("/v1/memories/types")),
            ("POST", "/v1/memories/{memory_id}/records/{record_id}/operations/{name}", "200",
             await a.post(f"{m}/records/{task['id']}/operations/complete", json={})),
            ("GET", "/v1/memories/{memory_id}/access", "200",
             await a.get(m + "/access", params={"principal": f"member:{me['id']}"})),
            ("POST", "/v1/memories/{memory_id}/graph", "200", await a.post(m + "/graph", json={})),
            *await _agent_surface_answers(gw, memory),
            ("GET", "/v1/audit", "200", await a.get("/v1/audit", params={"limit": 5})),
            ("GET", "/v1/audit/verify", "200", await a.get("/v1/audit/verify")),
            ("DELETE", "/v1/memories/{memory_id}/grants/{grant_id}", "200",
             await a.delete(f"{m}/grants/{grant.json()['id']}")),
            ("DELETE", "/v1/memories/{memory_id}/records/{record_id}", "200", await a.delete(one)),
        ]
        exported = await a.get(m + "/export")
        target = (await gw.root("Target"))["id"]
        answers += [
            ("POST", "/v1/memories/{memory_id}/import", "200", await a.post(
                f"/v1/memories/{target}/import", content=exported.content,
                headers={"Content-Type": "application/x-ndjson"})),
            ("POST", "/v1/memories/{memory_id}/migrate", "200", await a.post(m + "/migrate", json={"to": "archive"})),
            ("GET", "/v1/memories/{memory_id}/migrate", "200", await a.get(m + "/migrate")),
            ("DELETE", "/v1/memories/{memory_id}", "200", await a.delete(f"/v1/memories/{below['id']}")),
        ]
        for method, path, status, answer in answers:
            assert str(answer.status_code) == status, (method, path, answer.text)
            jsonschema.validate(answer.json(), _answer_schema(method, path, status))
        rows = next(x for _m, p, _s, x in answers if p.endswith("/query")).json()
        assert rows["object"] == "memory.query_result" and rows["rows"]  # the rows shape was checked too


async def test_ratification_answers_match_their_described_schema(tmp_path: Path) -> None:
    """An approval (with the record) and a rejection (record null) of a ratifying plugin's drafts validate
    against the ratification schema."""
    scratch = tmp_path / "plugin"
    scratch.mkdir()
    config = make_config(tmp_path, providers={
        "drafts": {"adapter": "plugin", **plugin_options(scratch, "--ratification", "--pending")}})
    async with running_gateway(config) as gw:
        memory = (await gw.root("Drafts", provider="drafts"))["id"]
        decided = []
        for decision in ("approve", "reject"):
            made = await gw.admin.post(f"/v1/memories/{memory}/records", json={"type": "fact", "content": decision})
            assert made.status_code == 201, made.text
            decided.append(await gw.admin.post(f"/v1/memories/{memory}/records/{made.json()['id']}/ratification",
                                               json={"decision": decision}))
        schema = _answer_schema("POST", "/v1/memories/{memory_id}/records/{record_id}/ratification")
        for answer in decided:
            assert answer.status_code == 200, answer.text
            jsonschema.validate(answer.json(), schema)
        assert decided[0].json()["record"] is not None and decided[1].json()["record"] is None


async def test_health_answers_match_their_described_schemas(gateway: Gateway) -> None:
    """/healthz and /readyz, answered by the readiness gate before any route, are described by models in
    the served document and their answers validate against them."""
    served = (await gateway.admin.get("/openapi.json")).json()
    for path in ("/healthz", "/readyz"):
        answer = await gateway.admin.get(path)
        assert answer.status_code == 200, answer.text
        schema = served["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert "$ref" in schema, (path, schema)
        jsonschema.validate(answer.json(), {**schema, "components": served["components"]})
