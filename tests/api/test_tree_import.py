"""POST /v1/imports/tree: a tree of memories and grants from NDJSON, all of it or none of it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import sqlalchemy as sa

from gateway.server.app import create_app, open_services
from gateway.state import schema as t
from policies.access import MAX_DEPTH
from tests.api._gateway import Gateway, make_config, running_gateway

NDJSON = {"content-type": "application/x-ndjson"}


def body(*lines: dict[str, Any]) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def answer_lines(answer: httpx.Response) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in answer.content.splitlines() if line.strip()]


async def post_import(client: httpx.AsyncClient, content: bytes) -> httpx.Response:
    return await client.post("/v1/imports/tree", content=content, headers=NDJSON)


async def memory_rows(gateway: Gateway) -> set[str]:
    async with gateway.services.store.engine.connect() as conn:
        return {row.id for row in await conn.execute(sa.select(t.memories.c.id))}


async def decisions(gateway: Gateway, operation: str) -> list[dict[str, Any]]:
    await gateway.services.audit.flush()
    page = await gateway.admin.get("/v1/audit", params={"limit": "1000", "operation": operation})
    assert page.status_code == 200, page.text
    return page.json()["data"]


async def test_an_import_creates_the_tree_with_its_grants_and_reports_progress(gateway: Gateway) -> None:
    """Memory lines hung below earlier lines by ref or id and below an existing memory, and a grant line,
    are all created; the answer is NDJSON progress lines then the report; the grantee reads what it got."""
    company = await gateway.root("Company")
    reader_id, reader = await gateway.member("reader")
    answer = await post_import(gateway.admin, body(
        {"ref": "eu", "name": "Europe", "parent": company["id"]},
        {"id": "cust-1", "name": "Customer 1", "parent": "eu", "description": "first"},
        {"name": "Notes", "parent": "cust-1", "restricted": True},
        {"ref": "other", "name": "Another root"},
        {"grant": {"memory": "cust-1", "principal": f"member:{reader_id}", "privilege": "read"}},
    ))
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    lines = answer_lines(answer)
    assert lines[0] == {"object": "memory.tree_import.progress", "phase": "checked", "done": 5, "total": 5}
    writing = [line for line in lines if line.get("phase") == "writing"]
    assert writing and writing[-1]["done"] == writing[-1]["total"]
    report = lines[-1]
    assert report == {"object": "memory.tree_import", "memories": 4, "grants": report["grants"], "roots": 1,
                      "under": [company["id"]], "lines": 5}
    tree = gateway.services.store.tree
    europe = next(m for m in tree.children_of(company["id"]))
    assert tree.get(europe).name == "Europe"  # type: ignore[union-attr]
    assert tree.parent_of("cust-1") == europe
    notes = tree.children_of("cust-1")[0]
    assert tree.get(notes).restricted  # type: ignore[union-attr]
    assert (await memory_rows(gateway)) >= {europe, "cust-1", notes}
    # The importer reaches every memory it made, the restricted one included, like a single create.
    listed = await gateway.admin.get(f"/v1/memories/{notes}")
    assert listed.status_code == 200, listed.text
    assert set(listed.json()["privileges"]) == {"read", "write", "create", "delete"}
    assert (await reader.get("/v1/memories/cust-1")).status_code == 200
    assert (await reader.get(f"/v1/memories/{company['id']}")).status_code == 404


async def test_a_bad_line_is_answered_with_its_number_and_nothing_is_imported(gateway: Gateway) -> None:
    """A line that is not JSON, misses a field, names no memory or hangs below a later line is refused
    with its line number in the envelope, and none of the lines before it is written."""
    company = await gateway.root("Company")
    before = await memory_rows(gateway)
    good = {"ref": "a", "name": "A", "parent": company["id"]}
    cases = [
        (b"{not json\n", 422, "memory_invalid"),
        (orjson.dumps({"parent": "a"}) + b"\n", 422, "memory_invalid"),
        (orjson.dumps({"name": "x", "parent": "hmem_nope"}) + b"\n", 404, "memory_not_found"),
        (orjson.dumps({"name": "x", "parent": "later"}) + b"\n" + orjson.dumps({"ref": "later", "name": "L"}) + b"\n",
         404, "memory_not_found"),
        (orjson.dumps({"name": "x", "parent": "a", "colour": "red"}) + b"\n", 422, "memory_invalid"),
        (orjson.dumps({"grant": {"memory": "a", "principal": "member:mbr_nobody", "privilege": "read"}}) + b"\n",
         422, "memory_invalid"),
    ]
    for tail, status, code in cases:
        answer = await post_import(gateway.admin, body(good, {"name": "B", "parent": "a"}) + b"\n" + tail)
        assert answer.status_code == status, (tail, answer.text)
        error = answer.json()["error"]
        assert error["code"] == code
        assert error["detail"]["line"] == 4, (tail, error)
        assert "Line 4" in error["message"]
    assert await memory_rows(gateway) == before
    assert len(gateway.services.store.tree) == len(before)


async def test_an_import_refuses_duplicate_ids_and_refs_and_a_tree_too_deep(gateway: Gateway) -> None:
    """An id given twice, an id an existing memory has, a ref given twice, and a chain deeper than the
    tree allows are refused (nothing written); a parent can only be an earlier line, so no cycle is possible."""
    company = await gateway.root("Company")
    before = await memory_rows(gateway)
    refused = [
        body({"id": "x1", "name": "X"}, {"id": "x1", "name": "X again"}),
        body({"id": company["id"], "name": "Shadow"}),
        body({"ref": "r", "name": "R"}, {"ref": "r", "name": "R again"}),
        body({"id": "loop-a", "name": "A", "parent": "loop-b"}, {"id": "loop-b", "name": "B", "parent": "loop-a"}),
        body({"ref": "d0", "name": "deep"}, *({"ref": f"d{i}", "name": "deep", "parent": f"d{i - 1}"}
                                              for i in range(1, MAX_DEPTH + 2))),
    ]
    for content in refused:
        answer = await post_import(gateway.admin, content)
        assert answer.status_code in (404, 422), answer.text
        assert answer.json()["error"]["detail"]["line"] >= 1
    assert await memory_rows(gateway) == before
    assert gateway.services.store.tree.broken_chain() is None


async def test_a_non_admin_is_refused_in_the_envelope_and_the_refusal_is_audited(gateway: Gateway) -> None:
    """A member that is not an administrator gets 403 in the envelope, even where it holds create, and the
    refusal is in the decision log."""
    company = await gateway.root("Company")
    member_id, member = await gateway.member("ann")
    await gateway.grant(company["id"], f"member:{member_id}", "create")
    answer = await post_import(member, body({"name": "Mine", "parent": company["id"]}))
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["type"] == "permission_error"
    refused = [d for d in await decisions(gateway, "memories.import_tree") if d["decision"] == "deny"]
    assert any(d["principal"] == f"member:{member_id}" for d in refused), refused
    assert len(gateway.services.store.tree) == 1


async def test_an_import_is_audited_with_what_it_covered(gateway: Gateway) -> None:
    """The administrator check, the create decision on the existing parent, and one entry that says how
    many memories and grants the import made."""
    company = await gateway.root("Company")
    answer = await post_import(gateway.admin, body({"name": "A", "parent": company["id"]}, {"name": "R"}))
    assert answer.status_code == 200, answer.text
    found = await decisions(gateway, "memories.import_tree")
    assert any(d["memory_id"] == company["id"] and d["privilege"] == "create" and d["decision"] == "allow"
               for d in found)
    assert any("importing 2 memories (1 roots" in d["reason"] for d in found), found


async def test_a_wrong_media_type_is_415(gateway: Gateway) -> None:
    """The body must be declared NDJSON."""
    answer = await gateway.admin.post("/v1/imports/tree", json={"name": "A"})
    assert answer.status_code == 415, answer.text
    assert answer.json()["error"]["code"] == "memfed_ndjson_required"


async def test_single_creates_and_a_delete_racing_an_import_lose_nothing(gateway: Gateway) -> None:
    """Creates under the import's parent and a delete of another parent, sent while a large import
    streams, all land or are refused whole: the rows and the in-memory tree agree, the tree holds no
    cycle, every single create is there, and the import is there entirely or not at all."""
    company = await gateway.root("Company")
    doomed = await gateway.root("Doomed")
    lines = [{"ref": "top", "name": "Top", "parent": company["id"]}]
    lines += [{"ref": f"n{i}", "name": f"N{i}", "parent": "top" if i % 7 == 0 else f"n{i - 1}"}
              for i in range(1, 3000)]
    lines.append({"name": "Under doomed", "parent": doomed["id"]})

    async def single_creates() -> list[str]:
        made = []
        for i in range(5):
            await asyncio.sleep(0)
            answer = await gateway.admin.post("/v1/memories", json={"name": f"S{i}", "parent_id": company["id"]})
            assert answer.status_code == 201, answer.text
            made.append(answer.json()["id"])
        return made

    async def delete_doomed() -> int:
        await asyncio.sleep(0)
        return (await gateway.admin.delete(f"/v1/memories/{doomed['id']}")).status_code

    imported, singles, deleted = await asyncio.gather(post_import(gateway.admin, body(*lines)), single_creates(),
                                                      delete_doomed())
    tree = gateway.services.store.tree
    assert set(singles) <= set(tree.all_ids())
    assert deleted == 200
    assert await memory_rows(gateway) == set(tree.all_ids())
    assert tree.broken_chain() is None
    outcome = answer_lines(imported) if imported.status_code == 200 else [imported.json()]
    tops = [m for m in tree.all_ids() if tree.get(m).name == "Top"]  # type: ignore[union-attr]
    if outcome[-1].get("object") == "memory.tree_import":
        # The import went first: all of it is there, but for the memory the delete took with Doomed.
        assert len(tops) == 1 and len(tree.subtree(tops[0])) == 3000
        assert len(tree) == 1 + 5 + 3000
    else:
        # The delete went first, or was under way: the import is refused whole (404 at its line, or an
        # error line at the end) and not one of its 3001 memories is there.
        assert "error" in outcome[-1], outcome[-1]
        assert tops == [] and len(tree) == 1 + 5


async def test_a_second_instance_sees_the_imported_memories_on_its_next_request(tmp_path: Path) -> None:
    """Two gateways on one state database: what an import through A wrote, B serves at once."""
    state = {"url": f"sqlite+aiosqlite:///{tmp_path}/state.sqlite3"}
    async with running_gateway(make_config(tmp_path / "a", state=state)) as gw_a:
        config_b = make_config(tmp_path / "b", state=state)
        services_b = await open_services(config_b)
        try:
            on_b = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(config_b, services=services_b)),
                                     base_url="http://memfed", headers={"Authorization": f"Bearer {gw_a.admin_key}"})
            company = await gw_a.root("Company")
            assert (await on_b.get(f"/v1/memories/{company['id']}")).status_code == 200
            lines = [{"id": f"imp-{i}", "name": f"I{i}", "parent": company["id"] if i == 0 else f"imp-{i - 1}"}
                     for i in range(25)]
            answer = await post_import(gw_a.admin, body(*lines))
            assert answer_lines(answer)[-1]["object"] == "memory.tree_import", answer.text
            seen = await on_b.get("/v1/memories/imp-24")
            assert seen.status_code == 200, seen.text
            assert services_b.store.tree.parent_of("imp-24") == "imp-23"
            assert len(services_b.store.tree) == len(gw_a.services.store.tree)
            await on_b.aclose()
        finally:
            await services_b.close()


async def test_the_route_is_in_openapi_with_its_line_schemas_and_error_statuses(gateway: Gateway) -> None:
    """/openapi.json declares the NDJSON body by the schema of a line, the answer by the schema of its
    lines, and the statuses the import can be refused with."""
    document = (await gateway.admin.get("/openapi.json")).json()
    operation = document["paths"]["/v1/imports/tree"]["post"]
    assert operation["requestBody"]["content"]["application/x-ndjson"]["schema"] == {
        "$ref": "#/components/schemas/ImportLine"}
    assert operation["responses"]["200"]["content"]["application/x-ndjson"]["schema"] == {
        "$ref": "#/components/schemas/ImportAnswerLine"}
    assert {"401", "403", "404", "409", "413", "415", "422"} <= set(operation["responses"])
    schemas = document["components"]["schemas"]
    assert {"ImportMemoryLine", "ImportGrantLine", "ImportProgressOut", "ImportTreeOut"} <= set(schemas)
    assert "name" in schemas["ImportMemoryLine"]["required"]


async def test_an_empty_import_writes_nothing_and_reports_zero(gateway: Gateway) -> None:
    """No lines (or only blank ones) is an import of nothing, not an error."""
    answer = await post_import(gateway.admin, b"\n\n")
    assert answer.status_code == 200, answer.text
    report = answer_lines(answer)[-1]
    assert report["object"] == "memory.tree_import" and report["memories"] == 0 and report["lines"] == 0


async def test_a_client_gone_when_the_answer_starts_leaves_nothing_written(gateway: Gateway) -> None:
    """The client disconnects as soon as its body is sent (ASGI `http.disconnect`): the streamed answer is
    cancelled, the write it started rolls back before its first batch, and the tree lock is free after."""
    company = await gateway.root("Company")
    before = await memory_rows(gateway)
    content = body(*({"name": f"N{i}", "parent": company["id"]} for i in range(25_000)))
    sent = False
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": content, "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/v1/imports/tree", "raw_path": b"/v1/imports/tree",
             "query_string": b"", "root_path": "", "server": ("memfed", 80), "client": ("127.0.0.1", 1),
             "headers": [(b"host", b"memfed"), (b"content-type", b"application/x-ndjson"),
                         (b"authorization", f"Bearer {gateway.admin_key}".encode())]}
    await gateway.app(scope, receive, send)
    for _ in range(100):  # the write task ends (rolled back) on its own turn of the loop
        if not gateway.services.store.tree_lock.locked():
            break
        await asyncio.sleep(0.05)
    assert statuses == [200]
    assert not gateway.services.store.tree_lock.locked()
    assert await memory_rows(gateway) == before
    assert set(gateway.services.store.tree.all_ids()) == before


async def test_the_collector_runs_again_after_an_import_whether_it_was_written_or_refused(gateway: Gateway) -> None:
    """The cyclic collector is paused while an import runs; once it is written, or refused at a line, it
    is on again."""
    import gc

    company = await gateway.root("Company")
    assert gc.isenabled()
    written = await post_import(gateway.admin, body({"name": "A", "parent": company["id"]}))
    assert answer_lines(written)[-1]["object"] == "memory.tree_import"
    assert gc.isenabled()
    refused = await post_import(gateway.admin, body({"name": "A", "parent": company["id"]}, {"name": 3}))
    assert refused.status_code == 422
    assert gc.isenabled()


async def test_a_state_store_failure_while_writing_ends_the_answer_with_an_envelope_and_writes_nothing(
        gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The database fails after the first batch went in: the answer (already 200) ends with a 503 envelope
    that says nothing was committed, the transaction is rolled back, and the next import works."""
    from gateway.state import tree_import as writing

    company = await gateway.root("Company")
    before = await memory_rows(gateway)
    real = writing.insert_rows
    calls = 0

    async def failing(conn: Any, table: Any, rows: list[Any]) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise sa.exc.OperationalError("INSERT", {}, Exception("disk I/O error"))
        await real(conn, table, rows)

    monkeypatch.setattr(writing, "insert_rows", failing)
    answer = await post_import(gateway.admin, body(*({"name": f"N{i}", "parent": company["id"]}
                                                     for i in range(writing.BATCH + 10))))
    assert answer.status_code == 200
    last = answer_lines(answer)[-1]
    assert last["error"]["code"] == "memfed_state_unavailable"
    assert last["error"]["detail"] == {"status": 503, "committed": False}
    assert "disk" not in answer.text  # the driver's message stays in the log
    assert await memory_rows(gateway) == before
    monkeypatch.setattr(writing, "insert_rows", real)
    again = await post_import(gateway.admin, body({"name": "After", "parent": company["id"]}))
    assert answer_lines(again)[-1]["object"] == "memory.tree_import"


async def test_a_line_longer_than_the_limit_is_413_naming_it_whether_or_not_it_ends_the_body(gateway: Gateway) -> None:
    """A line past 64 KiB is refused with its number, inside the body or as its last unterminated line."""
    long_name = {"name": "x" * (70 * 1024)}
    for content in (body({"name": "ok"}, long_name, {"name": "ok"}), body({"name": "ok"}) + orjson.dumps(long_name)):
        answer = await post_import(gateway.admin, content)
        assert answer.status_code == 413, answer.text
        assert answer.json()["error"]["detail"]["line"] == 2
    assert len(gateway.services.store.tree) == 0


async def test_the_importer_gets_all_four_privileges_with_a_grant_only_where_inheritance_would_not_give_them(
        gateway: Gateway) -> None:  # fmt: skip
    """Below a parent where the importer holds every privilege, its memories inherit them and no grant a
    memory is written; below one where it holds only `create`, each memory at the top of the import gets
    the importer's implicit grant, as a single create would. Either way it holds all four on each."""
    owned = await gateway.root("Owned")  # made by this admin: it holds all four there
    other = await gateway.root("Other")
    made = await gateway.admin.post("/v1/members", json={"name": "second admin", "type": "human", "admin": True})
    second_id = made.json()["id"]
    key = (await gateway.admin.post(f"/v1/members/{second_id}/keys")).json()["key"]
    second = gateway.client(key)
    await gateway.grant(other["id"], f"member:{second_id}", "create")
    await gateway.grant(owned["id"], f"member:{second_id}", "read", "write", "create", "delete")
    lines = [{"id": f"own-{i}", "name": "n", "parent": owned["id"]} for i in range(50)]
    lines += [{"id": f"oth-{i}", "name": "n", "parent": other["id"]} for i in range(50)]
    answer = await post_import(second, body(*lines))
    assert answer_lines(answer)[-1]["grants"] == 50, answer.text
    tree = gateway.services.store.tree
    assert all(not tree.grants_on(f"own-{i}") for i in range(50))
    assert all(len(tree.grants_on(f"oth-{i}")) == 1 for i in range(50))
    for memory_id in ("own-7", "oth-7"):
        seen = await second.get(f"/v1/memories/{memory_id}")
        assert set(seen.json()["privileges"]) == {"read", "write", "create", "delete"}, seen.text


async def test_a_body_chunk_of_thousands_of_lines_is_checked_with_turns_of_the_loop_between(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One chunk of 2,000 lines (what the server gathers while the previous one was checked): a task
    counting loop turns runs while the lines are checked, and every line reaches the reader in order."""
    from gateway.api import tree_import

    class Request:
        async def stream(self) -> Any:
            yield b"".join(b'{"name": "m%d"}\n' % i for i in range(2000))

    class Call:
        request = Request()

    taken: list[int] = []
    turns_at: list[int] = []
    turns = 0

    class Reader:
        def take(self, number: int, raw: bytes) -> None:
            taken.append(number)
            turns_at.append(turns)

    stop = asyncio.Event()

    async def count() -> None:
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    counter = asyncio.create_task(count())
    await asyncio.sleep(0)
    await tree_import.read_lines(Call(), Reader())  # type: ignore[arg-type]
    stop.set()
    await counter
    assert taken == list(range(1, 2001))
    assert turns_at[-1] - turns_at[0] >= 2000 // tree_import.LINES_BETWEEN_YIELDS - 1
