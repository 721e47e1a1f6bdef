"""Snapshot names: one per memory, decided by the database even when two requests race on a name."""

from __future__ import annotations

import asyncio

from tests.api._gateway import Gateway


async def test_a_second_snapshot_of_the_same_name_is_refused(gateway: Gateway) -> None:
    """The name is taken: 409 memfed_snapshot_exists on `name`; another memory may use the name."""
    memory = (await gateway.root())["id"]
    first = await gateway.admin.post(f"/v1/memories/{memory}/snapshots", json={"name": "v1"})
    assert first.status_code == 201, first.text
    again = await gateway.admin.post(f"/v1/memories/{memory}/snapshots", json={"name": "v1", "message": "x"})
    assert (again.status_code, again.json()["error"]["code"], again.json()["error"]["param"]) == (
        409, "memfed_snapshot_exists", "name")
    listed = (await gateway.admin.get(f"/v1/memories/{memory}/snapshots")).json()["data"]
    assert [(s["name"], s["message"]) for s in listed] == [("v1", "")]


async def test_two_requests_racing_on_one_snapshot_name_make_one_snapshot(gateway: Gateway) -> None:
    """Started together, one request makes the snapshot and the other answers 409, never a 500."""
    memory = (await gateway.root())["id"]
    for round_ in range(5):
        name = f"race-{round_}"
        answers = await asyncio.gather(*(gateway.admin.post(f"/v1/memories/{memory}/snapshots", json={"name": name})
                                         for _ in range(2)))
        assert sorted(a.status_code for a in answers) == [201, 409], [a.text for a in answers]
    listed = (await gateway.admin.get(f"/v1/memories/{memory}/snapshots")).json()["data"]
    assert sorted(s["name"] for s in listed) == [f"race-{i}" for i in range(5)]
