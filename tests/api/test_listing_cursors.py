"""Every listing answers a cursor it did not hand out the same way: 422 on `cursor`, one message."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api._gateway import Gateway

MESSAGE = "The cursor is not one this server gave."


def _bad_cursor(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 422, answer.text
    error: dict[str, Any] = answer.json()["error"]
    assert (error["param"], error["message"], error["type"]) == ("cursor", MESSAGE, "invalid_request_error")
    return error


async def _next(gateway: Gateway, path: str) -> str:
    answer = await gateway.admin.get(path, params={"limit": 1})
    assert answer.status_code == 200, answer.text
    cursor: str | None = answer.json()["next"]
    assert cursor is not None, (path, answer.text)
    return cursor


async def test_a_cursor_from_another_listing_is_refused_by_every_listing(gateway: Gateway) -> None:
    """A cursor handed out by one listing (memories, records, audit in either order) sent to another is the
    same bad-cursor error: the records listing of a provider included, whose refusal is the gateway's own."""
    root = await gateway.root()
    await gateway.root("Second")
    for text in ("one", "two"):
        made = await gateway.admin.post(f"/v1/memories/{root['id']}/records", json={"content": text})
        assert made.status_code == 201, made.text
    records = f"/v1/memories/{root['id']}/records"
    handed = {
        "/v1/memories": await _next(gateway, "/v1/memories"),
        records: await _next(gateway, records),
        "/v1/audit": await _next(gateway, "/v1/audit"),
    }
    listings = [*handed, f"/v1/memories/{root['id']}/consolidations"]
    for source, cursor in handed.items():
        for path in listings:
            if path == source:
                continue
            error = _bad_cursor(await gateway.admin.get(path, params={"cursor": cursor}))
            assert error["code"] == ("memfed_invalid_request" if path == "/v1/audit" else "memory_invalid"), path
    newest = await gateway.admin.get("/v1/audit", params={"cursor": handed["/v1/audit"], "order": "newest"})
    _bad_cursor(newest)


async def test_an_edited_cursor_is_refused_by_its_own_listing(gateway: Gateway) -> None:
    """Flipping one character of a cursor a listing handed out makes that listing refuse it."""
    await gateway.root()
    await gateway.root("Second")
    cursor = await _next(gateway, "/v1/memories")
    assert (await gateway.admin.get("/v1/memories", params={"cursor": cursor})).status_code == 200
    edited = ("B" if cursor[0] == "A" else "A") + cursor[1:]
    _bad_cursor(await gateway.admin.get("/v1/memories", params={"cursor": edited}))
