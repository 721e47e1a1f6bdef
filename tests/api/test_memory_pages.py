"""Pages of `GET /v1/memories` resume from their cursor's keys: a memory deleted or created between pages
neither makes the next page skip a memory that stayed nor repeat one already listed (an offset into the
listing did both); a cursor from a deleted memory still resumes after it; entry points follow the tree."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api._gateway import Gateway


async def _page(client: httpx.AsyncClient, params: dict[str, str], cursor: str | None) -> dict[str, Any]:
    answer = await client.get("/v1/memories", params={**params, "limit": "2", **({"cursor": cursor} if cursor else {})})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def test_a_child_page_after_a_listed_child_is_deleted_skips_nothing(gateway: Gateway) -> None:
    """?parent= pages of two: deleting a child already listed (the cursor's own) before asking the next
    page loses none of the children that stay, and repeats none."""
    root = await gateway.root()
    made = [(await gateway.child(gateway.admin, root["id"], f"c{i}"))["id"] for i in range(6)]
    first = await _page(gateway.admin, {"parent": root["id"]}, None)
    listed = [m["id"] for m in first["data"]]
    assert (await gateway.admin.delete(f"/v1/memories/{listed[-1]}")).status_code == 200
    seen, cursor = list(listed), first["next"]
    while cursor:
        page = await _page(gateway.admin, {"parent": root["id"]}, cursor)
        seen.extend(m["id"] for m in page["data"])
        cursor = page["next"]
    assert len(seen) == len(set(seen))
    assert set(seen) == set(made)


async def test_a_subtree_page_after_deletes_and_creates_lists_each_staying_memory_once(gateway: Gateway) -> None:
    """?ancestor= pages of two: between pages a listed memory is deleted with its subtree and a memory is
    created; every memory present throughout is listed exactly once."""
    root = await gateway.root()
    branches = [(await gateway.child(gateway.admin, root["id"], f"b{i}"))["id"] for i in range(3)]
    leaves = [(await gateway.child(gateway.admin, b, f"l{i}"))["id"] for i, b in enumerate(branches) for _ in range(2)]
    staying = set(branches) | set(leaves)
    first = await _page(gateway.admin, {"ancestor": root["id"]}, None)
    seen = [m["id"] for m in first["data"]]
    cursor = first["next"]
    doomed = seen[-1]
    removed = (await gateway.admin.get("/v1/memories", params={"ancestor": doomed, "limit": "200"})).json()["data"]
    staying -= {doomed, *(m["id"] for m in removed)}
    assert (await gateway.admin.delete(f"/v1/memories/{doomed}")).status_code == 200
    while cursor:
        await gateway.child(gateway.admin, branches[0], "new")
        page = await _page(gateway.admin, {"ancestor": root["id"]}, cursor)
        seen.extend(m["id"] for m in page["data"])
        cursor = page["next"]
    assert len(seen) == len(set(seen))
    assert staying <= set(seen)


async def test_a_cursor_of_another_listing_or_not_made_here_is_refused_on_cursor(gateway: Gateway) -> None:
    """A child listing's cursor given to a subtree listing, or to entry points, is 422 on `cursor`."""
    root = await gateway.root()
    for i in range(3):
        await gateway.child(gateway.admin, root["id"], f"c{i}")
    cursor = (await _page(gateway.admin, {"parent": root["id"]}, None))["next"]
    assert cursor
    for params in ({"ancestor": root["id"]}, {}):
        answer = await gateway.admin.get("/v1/memories", params={**params, "cursor": cursor})
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["param"] == "cursor"


async def test_entry_points_follow_a_grant_made_after_they_were_listed(gateway: Gateway) -> None:
    """The entry points kept for a caller are of one version of the tree: a grant made after a listing
    shows in the next one, a revoked one goes."""
    root = await gateway.root()
    a = await gateway.child(gateway.admin, root["id"], "A")
    b = await gateway.child(gateway.admin, root["id"], "B")
    member_id, client = await gateway.member("reader")
    await gateway.grant(a["id"], f"member:{member_id}", "read")
    assert [m["id"] for m in (await client.get("/v1/memories")).json()["data"]] == [a["id"]]
    granted = await gateway.grant(b["id"], f"member:{member_id}", "read")
    assert [m["id"] for m in (await client.get("/v1/memories")).json()["data"]] == [a["id"], b["id"]]
    assert (await gateway.admin.delete(f"/v1/memories/{b['id']}/grants/{granted['id']}")).status_code in (200, 204)
    assert [m["id"] for m in (await client.get("/v1/memories")).json()["data"]] == [a["id"]]
