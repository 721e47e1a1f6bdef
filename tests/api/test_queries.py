"""Named and free queries over HTTP (§6.4, §6.5): define, list and run; params validated; privileges;
answers in the shape of a recall when the result is records, rows otherwise; memory_unsupported for a
provider or a language that runs none."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adapters.fake_mem0 import OSS_URL, FakeMem0
from tests.api._gateway import Gateway, make_config, running_gateway

BY_ACCOUNT = {
    "description": "Records about one account.",
    "params": {"type": "object", "required": ["account"], "additionalProperties": False,
               "properties": {"account": {"type": "string"}, "kind": {"type": "string"}}},
    "requires": "read",
    "language": "sql",
    "body": "SELECT * FROM records WHERE attributes ->> 'account' = :account AND (:kind IS NULL OR type = :kind)"
            " ORDER BY written_at",
}
COUNTS = {"params": {"type": "object", "properties": {}}, "language": "sql",
          "body": "SELECT type, count(*) AS n FROM records GROUP BY type ORDER BY type"}


async def _memory_with_records(gw: Gateway, name: str = "Accounts") -> tuple[str, list[dict[str, Any]]]:
    memory = (await gw.root(name))["id"]
    made = []
    for kind, text, account in (("fact", "Acme renews in March.", "acme"), ("note", "Acme wants a discount.", "acme"),
                                ("fact", "Zebra churned.", "zebra")):
        answer = await gw.admin.post(f"/v1/memories/{memory}/records",
                                     json={"type": kind, "content": text, "attributes": {"account": account}})
        assert answer.status_code == 201, answer.text
        made.append(answer.json())
    return memory, made


def error(answer: httpx.Response) -> tuple[int, str, str | None]:
    body = answer.json()["error"]
    return answer.status_code, body["code"], body["param"]


# --------------------------------------------------------------------------- define, list, run


async def test_define_list_and_run_a_named_query(gateway: Gateway) -> None:
    """PUT defines (201, then 200 when replaced), GET lists it with its parameters, POST runs it; a
    result of records answers in the shape of a recall, each result naming the memory it is in."""
    memory, made = await _memory_with_records(gateway)
    url = f"/v1/memories/{memory}/queries/by_account"

    first = await gateway.admin.put(url, json=BY_ACCOUNT)
    assert first.status_code == 201, first.text
    assert (first.json()["name"], first.json()["requires"], first.json()["params"]) == (
        "by_account", "read", BY_ACCOUNT["params"])
    again = await gateway.admin.put(url, json={**BY_ACCOUNT, "description": "Changed."})
    assert again.status_code == 200 and again.json()["description"] == "Changed."

    listed = (await gateway.admin.get(f"/v1/memories/{memory}/queries")).json()
    assert listed["object"] == "list" and [q["name"] for q in listed["data"]] == ["by_account"]
    assert listed["data"][0]["params"] == BY_ACCOUNT["params"]
    assert listed["x.memfed"]["free"][0]["language"] == "sql" and "CREATE TABLE records" in (
        listed["x.memfed"]["free"][0]["schema"])

    ran = await gateway.admin.post(url, json={"params": {"account": "acme"}})
    assert ran.status_code == 200, ran.text
    body = ran.json()
    assert body["object"] == "memory.recall" and body["degraded"] == [] and body["abstain"] is False
    assert [r["record"]["id"] for r in body["results"]] == [made[0]["id"], made[1]["id"]]
    assert all(r["memory"] == {"id": memory, "name": "Accounts"} and r["why"] == [] and r["score"] is None
               for r in body["results"])
    assert body["results"][0]["record"]["trust"] == "untrusted"


async def test_a_declared_param_left_out_is_null(gateway: Gateway) -> None:
    """An optional parameter the caller leaves out is bound as null, so `:kind IS NULL` holds."""
    memory, made = await _memory_with_records(gateway)
    url = f"/v1/memories/{memory}/queries/by_account"
    await gateway.admin.put(url, json=BY_ACCOUNT)
    only_notes = (await gateway.admin.post(url, json={"params": {"account": "acme", "kind": "note"}})).json()
    assert [r["record"]["id"] for r in only_notes["results"]] == [made[1]["id"]]


async def test_a_result_that_is_not_records_answers_rows(gateway: Gateway) -> None:
    """Columns of the statement's own answer as memory.query_result."""
    memory, _ = await _memory_with_records(gateway)
    url = f"/v1/memories/{memory}/queries/counts"
    assert (await gateway.admin.put(url, json=COUNTS)).status_code == 201
    ran = (await gateway.admin.post(url, json={})).json()
    assert ran == {"object": "memory.query_result", "columns": ["type", "n"], "rows": [["fact", 2], ["note", 1]],
                   "degraded": []}


async def test_delete_removes_a_named_query(gateway: Gateway) -> None:
    """DELETE needs write; afterwards the query is not listed and running it is 404 memfed_query_not_found."""
    memory, _ = await _memory_with_records(gateway)
    url = f"/v1/memories/{memory}/queries/counts"
    await gateway.admin.put(url, json=COUNTS)
    gone = await gateway.admin.delete(url)
    assert gone.status_code == 200 and gone.json()["deleted"] is True
    assert (await gateway.admin.get(f"/v1/memories/{memory}/queries")).json()["data"] == []
    assert error(await gateway.admin.post(url, json={})) == (404, "memfed_query_not_found", "name")
    assert error(await gateway.admin.delete(url)) == (404, "memfed_query_not_found", "name")


# --------------------------------------------------------------------------- params


@pytest.mark.parametrize(("params", "param"), [
    ({"account": 7}, "params.account"),
    ({}, "params.account"),
    ({"account": "acme", "extra": 1}, "params.extra"),
    ({"account": "acme", "kind": ["fact"]}, "params.kind"),
])
async def test_params_that_do_not_match_are_422_naming_the_param(gateway: Gateway, params: dict[str, Any],
                                                                 param: str) -> None:
    """A wrong type, a missing required or an undeclared parameter: 422 memory_invalid naming it (§12)."""
    memory, _ = await _memory_with_records(gateway)
    url = f"/v1/memories/{memory}/queries/by_account"
    await gateway.admin.put(url, json=BY_ACCOUNT)
    assert error(await gateway.admin.post(url, json={"params": params})) == (422, "memory_invalid", param)


@pytest.mark.parametrize(("change", "param"), [
    ({"params": {"type": "array"}}, "params"),
    ({"params": {"type": "object", "properties": {"a": {"type": "no-such-type"}}}}, "params"),
    ({"params": {"type": "object", "properties": {"a": {"$ref": "http://169.254.169.254/latest"}}}},
     "params.properties.a.$ref"),
    ({"params": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(a+)+$"}}}},
     "params.properties.a.pattern"),
    ({"params": {"type": "object", "patternProperties": {"^x": {}}}}, "params.patternProperties"),
    ({"body": "DELETE FROM records"}, "body"),
    ({"body": "SELECT * FROM sqlite_master"}, "body"),
    ({"body": "SELECT 1; DROP TABLE records"}, "body"),
    ({"body": "SELECT * FROM records WHERE id = :undeclared"}, "params"),
    ({"name": "other_name"}, "name"),
    ({"requires": "delete"}, "requires"),
])
async def test_a_definition_that_cannot_be_run_safely_is_422(gateway: Gateway, change: dict[str, Any],
                                                             param: str) -> None:
    """params must be an object schema that refers only to itself and uses no regular expression; the
    body must compile as one read of the container and use only declared parameters."""
    memory, _ = await _memory_with_records(gateway)
    answer = await gateway.admin.put(f"/v1/memories/{memory}/queries/by_account", json={**BY_ACCOUNT, **change})
    assert error(answer) == (422, "memory_invalid", param)
    assert (await gateway.admin.get(f"/v1/memories/{memory}/queries")).json()["data"] == []


@pytest.mark.parametrize("name", ["1abc", "has space", "x" * 65, "semi;colon", "dot.ted"])
async def test_a_query_name_must_be_a_tool_name(gateway: Gateway, name: str) -> None:
    """A name is a letter then letters, digits, _ or -, at most 64: it names the tool an agent is offered."""
    memory, _ = await _memory_with_records(gateway)
    answer = await gateway.admin.put(f"/v1/memories/{memory}/queries/{name}", json=COUNTS)
    assert error(answer) == (422, "memory_invalid", "name")


# --------------------------------------------------------------------------- privileges


async def test_read_runs_and_lists_write_defines(gateway: Gateway) -> None:
    """A reader lists and runs a query marked read, and cannot define one (403); a writer without read
    defines one but cannot run or list (a query answers with what it read); a stranger is told the
    memory does not exist."""
    memory, _ = await _memory_with_records(gateway)
    reader_id, reader = await gateway.member("reader")
    writer_id, writer = await gateway.member("writer")
    _, stranger = await gateway.member("stranger")
    await gateway.grant(memory, f"member:{reader_id}", "read")
    await gateway.grant(memory, f"member:{writer_id}", "write")
    url = f"/v1/memories/{memory}/queries/counts"

    assert error(await reader.put(url, json=COUNTS)) == (403, "memory_forbidden", None)
    assert (await writer.put(url, json=COUNTS)).status_code == 201
    assert (await reader.post(url, json={})).status_code == 200
    assert (await reader.get(f"/v1/memories/{memory}/queries")).status_code == 200
    assert error(await writer.post(url, json={}))[:2] == (403, "memory_forbidden")
    assert error(await writer.get(f"/v1/memories/{memory}/queries"))[:2] == (403, "memory_forbidden")
    assert error(await reader.delete(url))[:2] == (403, "memory_forbidden")
    for answer in (await stranger.get(f"/v1/memories/{memory}/queries"), await stranger.post(url, json={}),
                   await stranger.put(url, json=COUNTS),
                   await stranger.post(f"/v1/memories/{memory}/query", json={"language": "sql",
                                                                              "statement": "SELECT 1"})):
        assert error(answer)[:2] == (404, "memory_not_found")


async def test_a_query_marked_write_needs_write_to_run(gateway: Gateway) -> None:
    """requires "write": a reader is refused (403); a member holding read and write runs it."""
    memory, _ = await _memory_with_records(gateway)
    reader_id, reader = await gateway.member("reader")
    both_id, both = await gateway.member("both")
    await gateway.grant(memory, f"member:{reader_id}", "read")
    await gateway.grant(memory, f"member:{both_id}", "read", "write")
    url = f"/v1/memories/{memory}/queries/counts"
    await gateway.admin.put(url, json={**COUNTS, "requires": "write"})

    assert error(await reader.post(url, json={})) == (403, "memory_forbidden", None)
    assert (await both.post(url, json={})).status_code == 200


# --------------------------------------------------------------------------- free queries


async def test_a_free_query_reads_this_memory_only(gateway: Gateway) -> None:
    """POST /query runs the caller's statement on the memory in the path and nothing else: not its
    children (reading is exact, §6.1), not another memory named by id."""
    parent, made = await _memory_with_records(gateway)
    child = await gateway.child(gateway.admin, parent, "Child")
    hidden = await gateway.admin.post(f"/v1/memories/{child['id']}/records", json={"type": "fact", "content": "child"})
    url = f"/v1/memories/{parent}/query"

    rows = (await gateway.admin.post(url, json={"language": "sql", "statement": "SELECT id FROM records"})).json()
    assert sorted(r[0] for r in rows["rows"]) == sorted(m["id"] for m in made)
    by_id = await gateway.admin.post(url, json={"language": "sql", "statement": "SELECT * FROM records WHERE id = :id",
                                                "params": {"id": hidden.json()["id"]}})
    assert by_id.json()["object"] == "memory.recall" and by_id.json()["results"] == []
    assert by_id.json()["children"][0]["id"] == child["id"]


async def test_a_free_query_needs_only_read(gateway: Gateway) -> None:
    """A member holding read alone runs a free query."""
    memory, made = await _memory_with_records(gateway)
    reader_id, reader = await gateway.member("reader", "agent")
    await gateway.grant(memory, f"member:{reader_id}", "read")
    answer = await reader.post(f"/v1/memories/{memory}/query",
                               json={"language": "sql", "statement": "SELECT count(*) AS n FROM records"})
    assert answer.status_code == 200 and answer.json()["rows"] == [[len(made)]]


@pytest.mark.parametrize("statement", [
    "SELECT * FROM sqlite_master", "ATTACH DATABASE 'records.sqlite3' AS real", "PRAGMA database_list",
    "DELETE FROM records", "SELECT 1; DELETE FROM records", "SELECT load_extension('x')",
])
async def test_a_free_query_that_tries_to_escape_is_422(gateway: Gateway, statement: str) -> None:
    """Refused by the provider's container: 422 memory_invalid, the memory unchanged."""
    memory, made = await _memory_with_records(gateway)
    answer = await gateway.admin.post(f"/v1/memories/{memory}/query", json={"language": "sql", "statement": statement})
    assert error(answer)[:2] == (422, "memory_invalid")
    listed = (await gateway.admin.get(f"/v1/memories/{memory}/records")).json()["data"]
    assert len(listed) == len(made)


async def test_a_missing_param_of_a_free_query_is_named(gateway: Gateway) -> None:
    """A parameter the statement uses and the request does not give: 422 naming params.<name>."""
    memory, _ = await _memory_with_records(gateway)
    answer = await gateway.admin.post(f"/v1/memories/{memory}/query",
                                      json={"language": "sql", "statement": "SELECT * FROM records WHERE id = :id"})
    assert error(answer) == (422, "memory_invalid", "params.id")


async def test_bounds_a_free_query_hits_are_reported(gateway: Gateway) -> None:
    """An endless statement stops at half the provider's timeout (1 s by default) and a long result at
    1000 rows; each bound is named in degraded and the answer is 200."""
    memory, _ = await _memory_with_records(gateway)
    url = f"/v1/memories/{memory}/query"
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)"
    stopped = await gateway.admin.post(url, json={"language": "sql", "statement": endless + " SELECT count(*) FROM c"})
    assert stopped.status_code == 200 and stopped.json()["degraded"] == ["query:time_limit_1s"]
    capped = await gateway.admin.post(url, json={"language": "sql", "statement": endless + " SELECT x FROM c"})
    assert capped.json()["degraded"] == ["query:rows_capped_at_1000"] and len(capped.json()["rows"]) == 1000


async def test_another_language_is_unsupported(gateway: Gateway) -> None:
    """The embedded provider speaks sql: cypher is 422 memory_unsupported, for a definition and a
    free query alike."""
    memory, _ = await _memory_with_records(gateway)
    free = await gateway.admin.post(f"/v1/memories/{memory}/query",
                                    json={"language": "cypher", "statement": "MATCH (n) RETURN n"})
    assert error(free) == (422, "memory_unsupported", "language")
    named = await gateway.admin.put(f"/v1/memories/{memory}/queries/graph", json={**COUNTS, "language": "cypher"})
    assert error(named) == (422, "memory_unsupported", "language")


# --------------------------------------------------------------------------- a provider without queries


@pytest.fixture
async def with_mem0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Gateway]:
    monkeypatch.setenv("TEST_MEM0_KEY", "m0-SECRET-test-key-7f3a9c")
    vendor = FakeMem0("oss")
    config = make_config(tmp_path, providers={
        "vendor": {"adapter": "mem0", "variant": "oss", "base_url": OSS_URL, "api_key_env": "TEST_MEM0_KEY"},
    })
    async with running_gateway(config, http_client=vendor.client()) as gw:
        yield gw


async def test_a_provider_without_queries_answers_memory_unsupported(with_mem0: Gateway) -> None:
    """mem0 implements no queries: define, run and a free query are 422 memory_unsupported; the list
    answers, empty, without a free-query schema."""
    gw = with_mem0
    memory = (await gw.root("On mem0", provider="vendor"))["id"]
    base = f"/v1/memories/{memory}"
    assert error(await gw.admin.put(base + "/queries/counts", json=COUNTS))[:2] == (422, "memory_unsupported")
    assert error(await gw.admin.post(base + "/query", json={"language": "sql", "statement": "SELECT 1"}))[:2] == (
        422, "memory_unsupported")
    listed = (await gw.admin.get(base + "/queries")).json()
    assert listed["data"] == [] and "x.memfed" not in listed
    assert error(await gw.admin.post(base + "/queries/counts", json={})) == (404, "memfed_query_not_found", "name")


async def test_a_query_kept_for_a_memory_now_on_another_provider_is_unsupported(with_mem0: Gateway) -> None:
    """A named query stays with its memory; once the memory's provider runs no queries (it was moved),
    running it answers 422 memory_unsupported rather than failing."""
    from gateway.state import query_schema as q

    gw = with_mem0
    memory = (await gw.root("Moved", provider="vendor"))["id"]
    await gw.services.store.rows.insert(q.named_queries, memory_id=memory, name="counts", description="",
                                   params='{"type": "object"}', requires="read", language="sql",
                                   body=COUNTS["body"], created_by="m", created_at=0, updated_by="m", updated_at=0)
    assert [d["name"] for d in (await gw.admin.get(f"/v1/memories/{memory}/queries")).json()["data"]] == ["counts"]
    answer = await gw.admin.post(f"/v1/memories/{memory}/queries/counts", json={})
    assert error(answer)[:2] == (422, "memory_unsupported")
