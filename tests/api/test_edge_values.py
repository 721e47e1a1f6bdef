"""Values at the edges (lone surrogates, datetimes at year 1 and 9999, integers past 64 bits, odd digits,
wrong media types) are a 4xx in the envelope that changes nothing; never a 500, nor a provider's fault."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from gateway.agent import outbox
from tests.api._gateway import Gateway

SURROGATE = '"\\ud800"'  # the JSON text of a lone surrogate: valid JSON, not Unicode text
LATE = "9999-12-31T23:59:59-05:00"  # a year-10000 instant in UTC
EARLY = "0001-01-01T00:00:00+05:00"  # an instant before year 1 in UTC
HUGE = 2**63
ENVELOPE = {"type", "code", "message", "param", "detail"}


def _refused(answer: httpx.Response, status: int | tuple[int, ...] = 422) -> dict[str, Any]:
    statuses = status if isinstance(status, tuple) else (status,)
    assert answer.status_code in statuses, (answer.status_code, answer.text)
    error: dict[str, Any] = answer.json()["error"]
    assert set(error) == ENVELOPE
    return error


async def _post_raw(client: httpx.AsyncClient, path: str, text: str) -> httpx.Response:
    return await client.post(path, content=text.encode(), headers={"content-type": "application/json"})


async def _records(gateway: Gateway, memory_id: str) -> list[dict[str, Any]]:
    listed = await gateway.admin.get(f"/v1/memories/{memory_id}/records", params={"include": "all"})
    assert listed.status_code == 200, listed.text
    return list(listed.json()["data"])


async def test_a_lone_surrogate_anywhere_in_a_write_is_refused_and_writes_nothing(gateway: Gateway) -> None:
    """In content, attributes, an `x.` part, a revise, an observe and an erase id, "\\ud800" is 422 naming
    where it is; no record, version, erasure or outbox row comes of it."""
    memory = (await gateway.root())["id"]
    kept = (await gateway.admin.post(f"/v1/memories/{memory}/records", json={"content": "kept"})).json()
    records = f"/v1/memories/{memory}/records"
    writes = [
        (records, '{"content": ' + SURROGATE + "}", "content"),
        (records, '{"content": "x", "attributes": {"k": ' + SURROGATE + "}}", "attributes.k"),
        (records, '{"content": "x", "attributes": {' + SURROGATE + ": 1}}", "attributes"),
        (records, '{"content": [{"type": "x.note", "body": ' + SURROGATE + "}]}", "content.0.body"),
        (f"/v1/memories/{memory}/observe", '{"content": ' + SURROGATE + "}", "content"),
        (f"/v1/memories/{memory}/observe",
         '{"episodes": [{"content": [{"type": "text", "text": ' + SURROGATE + "}]}]}", "episodes.0.content.0.text"),
        (f"/v1/memories/{memory}/erase", '{"record_ids": [' + SURROGATE + "]}", "record_ids.0"),
    ]
    for path, text, param in writes:
        error = _refused(await _post_raw(gateway.admin, path, text))
        assert error["param"] == param, (path, error)
    revised = await gateway.admin.patch(f"{records}/{kept['id']}", content=('{"title": ' + SURROGATE + "}").encode(),
                                        headers={"content-type": "application/json"})
    assert _refused(revised)["param"] == "title"
    assert [(r["id"], r["version"], r["status"]) for r in await _records(gateway, memory)] == [
        (kept["id"], 1, "active")]
    assert await outbox.pending_count(gateway.services) == 0
    after = await gateway.admin.post(f"/v1/memories/{memory}/observe", json={"content": "fine"})
    assert after.status_code == 201, after.text  # nothing is left stuck in front of the next observe


async def test_a_lone_surrogate_in_a_filter_or_an_import_line_is_refused(gateway: Gateway) -> None:
    """A recall whose filter value is a lone surrogate is 422 (not 200 with the provider blamed in
    `degraded`); an import line holding one is 422 naming the line, and nothing is imported."""
    memory = (await gateway.root())["id"]
    recall = await _post_raw(gateway.admin, f"/v1/memories/{memory}/recall",
                             '{"filters": {"field": "attributes.k", "value": ' + SURROGATE + "}}")
    _refused(recall)
    line = ('{"id": "hrec_a", "versions": [{"type": "note", "content": [{"type": "text", "text": '
            + SURROGATE + '}], "version": 1, "status": "active", "time": {"written_at": "2026-01-01T00:00:00Z"},'
            ' "written_by": {"kind": "member", "id": "mbr_x"}}]}')
    imported = await gateway.admin.post(f"/v1/memories/{memory}/import", content=line.encode())
    assert _refused(imported)["detail"]["line"] == 1
    assert await _records(gateway, memory) == []


@pytest.mark.parametrize("moment", [LATE, EARLY])
async def test_datetimes_without_a_utc_instant_are_refused_everywhere(gateway: Gateway, moment: str) -> None:
    """A datetime whose UTC form falls outside years 1..9999 is 422 in `as_of` (list, get, recall),
    `time.valid_from`, a `time.*` filter, audit `since`/`until` and an import version; nothing is written."""
    memory = (await gateway.root())["id"]
    kept = (await gateway.admin.post(f"/v1/memories/{memory}/records", json={"content": "kept"})).json()
    records = f"/v1/memories/{memory}/records"
    answers = [
        await gateway.admin.get(records, params={"as_of": moment}),
        await gateway.admin.get(f"{records}/{kept['id']}", params={"as_of": moment}),
        await gateway.admin.post(f"/v1/memories/{memory}/recall", json={"query": "kept", "as_of": moment}),
        await gateway.admin.post(f"/v1/memories/{memory}/recall",
                                 json={"filters": {"field": "time.written_at", "op": "lt", "value": moment}}),
        await gateway.admin.post(records, json={"content": "x", "time": {"valid_from": moment}}),
        await gateway.admin.get("/v1/audit", params={"since": moment}),
        await gateway.admin.get("/v1/audit", params={"until": moment}),
    ]
    for answer in answers:
        _refused(answer)
    line = {"id": "hrec_a", "versions": [{"type": "note", "content": [{"type": "text", "text": "a"}],
                                          "version": 1, "status": "active", "time": {"written_at": moment},
                                          "written_by": {"kind": "member", "id": "mbr_x"}}]}
    _refused(await gateway.admin.post(f"/v1/memories/{memory}/import", content=json.dumps(line).encode()))
    assert [r["id"] for r in await _records(gateway, memory)] == [kept["id"]]


async def test_filters_refuse_huge_integers_nested_lists_and_non_dates(gateway: Gateway) -> None:
    """A filter with an integer past 2^63, `in` with a nested list, or a `time.*` value that is no date is
    422 on the recall, never 200 with the provider blamed in `degraded`."""
    memory = (await gateway.root())["id"]
    await gateway.admin.post(f"/v1/memories/{memory}/records", json={"content": "x", "attributes": {"n": 1}})
    recall = f"/v1/memories/{memory}/recall"
    for filters in ({"field": "attributes.n", "op": "gt", "value": HUGE},
                    {"field": "attributes.n", "op": "eq", "value": -HUGE - 1},
                    {"field": "attributes.n", "op": "in", "value": [1, [2, 3]]},
                    {"field": "attributes.n", "op": "in", "value": [{"a": 1}]},
                    {"field": "time.valid_from", "op": "gt", "value": "not a date"},
                    {"field": "time.written_at", "op": "lt", "value": 17}):
        answer = await gateway.admin.post(recall, json={"filters": filters})
        assert _refused(answer)["param"] is not None, filters
    fine = await gateway.admin.post(recall, json={"filters": {"field": "attributes.n", "op": "eq",
                                                              "value": 2**63 - 1}})
    assert fine.status_code == 200 and fine.json()["degraded"] == [], fine.text


async def test_cursors_holding_integers_past_64_bits_are_refused(gateway: Gateway) -> None:
    """A cursor that decodes to an integer past 2^63 (or a non-ASCII digit) is 422 on `cursor`."""
    memory = (await gateway.root())["id"]

    def b64(text: str, strip: bool = False) -> str:
        encoded = base64.urlsafe_b64encode(text.encode()).decode()
        return encoded.rstrip("=") if strip else encoded

    cases = [
        ("/v1/audit", b64(f"a:{2**64}:0", strip=True)),
        ("/v1/audit", b64("a:\u0661:0", strip=True)),
        (f"/v1/memories/{memory}/consolidations", b64(f"{2**64}:hrun_x")),
        ("/v1/memories", b64(f"o:{2**64}")),
    ]
    for path, cursor in cases:
        error = _refused(await gateway.admin.get(path, params={"cursor": cursor}))
        assert error["param"] == "cursor", (path, error)


async def test_a_content_index_is_ascii_digits_only(gateway: Gateway) -> None:
    """`content/%C2%B2` (a superscript two) is 404, not 500; `content/%D9%A1` (an Arabic-Indic one) is 404,
    not part 1."""
    memory = (await gateway.root())["id"]
    upload = await gateway.admin.post("/v1/files", files={"file": ("a.txt", b"bytes", "text/plain")})
    made = await gateway.admin.post(f"/v1/memories/{memory}/records", json={"content": [
        {"type": "text", "text": "t"}, {"type": "file", "file": {"id": upload.json()["id"]}}]})
    assert made.status_code == 201, made.text
    base = f"/v1/memories/{memory}/records/{made.json()['id']}/content"
    assert (await gateway.admin.get(f"{base}/1")).content == b"bytes"
    for index in ("%C2%B2", "%D9%A1", "1%20", "+1", "01x"):
        assert _refused(await gateway.admin.get(f"{base}/{index}"), 404)["code"] == "memfed_part_not_found"


async def test_media_types_methods_and_a_null_body(gateway: Gateway) -> None:
    """A JSON route refuses a non-JSON Content-Type with 415; a method a route does not take is 405 with
    `Allow`; a body of `null` is refused where `{}` is accepted."""
    memory = (await gateway.root())["id"]
    form = await gateway.admin.post(f"/v1/memories/{memory}/records", content=b"content=x",
                                    headers={"content-type": "application/x-www-form-urlencoded"})
    assert _refused(form, 415)["code"] == "memfed_json_required"
    plain = await gateway.admin.post(f"/v1/memories/{memory}/records", content=b'{"content": "x"}',
                                     headers={"content-type": "text/plain"})
    _refused(plain, 415)
    assert await _records(gateway, memory) == []
    wrong = await gateway.admin.request("PATCH", "/v1/memories")
    _refused(wrong, 405)
    assert set(wrong.headers["allow"].replace(" ", "").split(",")) >= {"GET", "POST"}
    empty = await _post_raw(gateway.admin, f"/v1/memories/{memory}/graph", "{}")
    assert empty.status_code == 200, empty.text
    _refused(await _post_raw(gateway.admin, f"/v1/memories/{memory}/graph", "null"))
