"""The fake SaaS memory service on its own: the documented behaviours the adapter does not exercise every
day (listing by status, the activity log, stats against the cap, NDJSON export and import, ingest job
states) and the refusals that keep an adapter honest (no key, a tenant argument, an unknown field)."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from tests.adapters.fake_saas import BASE_URL, KEY, FakeSaas


def call(fake: FakeSaas, method: str, path: str, *, key: str = KEY, body: Any = None,
         params: dict[str, Any] | None = None, content: bytes | None = None) -> httpx.Response:
    request = httpx.Request(method, BASE_URL + path, params=params, json=body, content=content,
                            headers={"Authorization": f"Bearer {key}"})
    return fake.handle(request)


def store(fake: FakeSaas, content: str, **fields: Any) -> dict[str, Any]:
    answer = call(fake, "POST", "/records", body={"content": content, "kind": "semantic", **fields})
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def test_refusals_name_their_code_in_the_error_envelope() -> None:
    """No key is 401 unauthorized; a tenant argument or an unknown field is 400 invalid_request."""
    fake = FakeSaas()
    cases = [
        (call(fake, "GET", "/stats", key="nope"), 401, "unauthorized"),
        (call(fake, "POST", "/records", body={"content": "x", "kind": "semantic", "tenant_id": "t"}), 400,
         "invalid_request"),
        (call(fake, "POST", "/records", body={"content": "x", "kind": "semantic", "owner": "me"}), 400,
         "invalid_request"),
        (call(fake, "POST", "/recall", body={"limit": 101}), 400, "invalid_request"),
        (call(fake, "GET", "/records/mrec_missing"), 404, "not_found"),
    ]
    for answer, status, code in cases:
        assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)
    assert fake.records == {}


def test_listing_pages_and_filters_by_status() -> None:
    """GET /records pages with next_cursor and filters active | superseded | expired | all."""
    fake = FakeSaas()
    old = store(fake, "v1", scope_id="s")
    call(fake, "POST", f"/records/{old['id']}/supersede", body={"content": "v2"})
    store(fake, "gone", scope_id="s", expires_at="2020-01-01T00:00:00+00:00")
    for i in range(3):
        store(fake, f"more {i}", scope_id="s")
    counts = {s: len(call(fake, "GET", "/records", params={"scope_id": "s", "status": s, "limit": 100}).json()["data"])
              for s in ("active", "superseded", "expired", "all")}
    assert counts == {"active": 4, "superseded": 1, "expired": 1, "all": 6}
    first = call(fake, "GET", "/records", params={"status": "all", "limit": 4}).json()
    second = call(fake, "GET", "/records", params={"status": "all", "limit": 4, "cursor": first["next_cursor"]}).json()
    assert len(first["data"]) == 4 and len(second["data"]) == 2 and second["next_cursor"] is None


def test_activity_and_stats_follow_every_mutation() -> None:
    """The mutation log says stored, updated, superseded and forgotten; stats count per dimension and
    show the cap."""
    fake = FakeSaas(cap=50)
    first = store(fake, "one", tier="core")
    call(fake, "PATCH", f"/records/{first['id']}", body={"importance": 0.9})
    call(fake, "POST", f"/records/{first['id']}/supersede", body={"content": "two"})
    call(fake, "POST", "/forget", body={"ids": [first["id"]]})
    actions = [a["action"] for a in call(fake, "GET", "/activity").json()["data"]]
    assert actions == ["stored", "updated", "stored", "superseded", "forgotten"]
    stats = call(fake, "GET", "/stats").json()
    assert (stats["records"], stats["cap"], stats["by_tier"], stats["by_kind"]) == (1, 50, {"core": 1}, {"semantic": 1})


def test_export_then_import_moves_a_scope_between_tenants() -> None:
    """NDJSON out of one tenant and into another keeps ids, chains and fields; importing ids that are held
    already skips them (the fake keeps one id space for all tenants), and a bad line is reported by number
    without stopping the rest."""
    fake = FakeSaas(keys={KEY: "a", "sk-b": "b"})
    first = store(fake, "v1", scope_id="s", category="c")
    call(fake, "POST", f"/records/{first['id']}/supersede", body={"content": "v2"})
    exported = call(fake, "GET", "/export", params={"scope_id": "s"})
    assert exported.headers["content-type"] == "application/x-ndjson"
    lines = [orjson.loads(line) for line in exported.content.splitlines() if line.strip()]
    assert [(r["content"], r["status"]) for r in lines] == [("v1", "superseded"), ("v2", "active")]
    body = exported.content + b'{"no": "id"}\n'
    report = call(fake, "POST", "/import", key="sk-b", content=body).json()
    assert (report["imported"], report["skipped"], [e["line"] for e in report["errors"]]) == (0, 2, [3])
    fake.records.clear()
    again = call(fake, "POST", "/import", key="sk-b", content=exported.content).json()
    assert (again["imported"], again["errors"]) == (2, [])
    moved = call(fake, "GET", "/export", key="sk-b", params={"scope_id": "s"}).content
    assert [orjson.loads(line)["superseded_by"] for line in moved.splitlines()] == [lines[0]["superseded_by"], None]


@pytest.mark.parametrize("mode, made", [("raw", 1), ("smart", 2)])
def test_an_ingest_job_moves_queued_running_done(mode: str, made: int) -> None:
    """A job is queued, then running, then done with the records it stored: raw one episodic record,
    smart each statement (questions and fragments are not statements)."""
    fake = FakeSaas()
    transcript = "Dana prefers email over calls. Why? The invoice address changed in May."
    job_id = call(fake, "POST", "/ingest", body={"transcript": transcript, "mode": mode}).json()["job_id"]
    assert fake.jobs[job_id]["status"] == "queued" and fake.records == {}
    states = [call(fake, "GET", f"/jobs/{job_id}").json() for _ in range(3)]
    assert [s["status"] for s in states] == ["running", "done", "done"]
    assert len(states[-1]["record_ids"]) == made
    kinds = {fake.records[i]["kind"] for i in states[-1]["record_ids"]}
    assert kinds == ({"episodic"} if mode == "raw" else {"semantic"})
