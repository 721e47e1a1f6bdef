"""An episode is append-only (§4.1): raw experience as it arrived is never revised (issue 10, item 10)."""

from __future__ import annotations

from tests.api._gateway import Gateway


async def test_a_revise_of_an_episode_is_memory_invalid_and_changes_nothing(gateway: Gateway) -> None:
    """PATCH of an episode, remembered or observed, is 422 memory_invalid naming type, and its history
    keeps the one version it arrived as."""
    memory = (await gateway.root("Turns"))["id"]
    remembered = await gateway.admin.post(f"/v1/memories/{memory}/records",
                                          json={"type": "episode", "content": "user: hello"})
    observed = await gateway.admin.post(f"/v1/memories/{memory}/observe",
                                        json={"episodes": [{"content": "assistant: hi"}]})
    assert remembered.status_code == 201 and observed.status_code == 201, (remembered.text, observed.text)
    for record in (remembered.json(), observed.json()["records"][0]):
        assert record["type"] == "episode"
        url = f"/v1/memories/{memory}/records/{record['id']}"
        for change in ({"content": "user: rewritten"}, {"title": "A title"}, {"type": "note"},
                       {"attributes": {"standing": True}}):
            answer = await gateway.admin.patch(url, json=change)
            assert answer.status_code == 422, answer.text
            error = answer.json()["error"]
            assert (error["code"], error["param"]) == ("memory_invalid", "type")
            assert "append-only" in error["message"]
        history = (await gateway.admin.get(url + "/history")).json()["data"]
        assert [v["version"] for v in history] == [1]


async def test_a_record_cannot_be_revised_into_an_episode(gateway: Gateway) -> None:
    """An episode is what arrived, so a note cannot become one by revision; the note is unchanged."""
    memory = (await gateway.root("Notes"))["id"]
    made = (await gateway.admin.post(f"/v1/memories/{memory}/records", json={"type": "note", "content": "x"})).json()
    answer = await gateway.admin.patch(f"/v1/memories/{memory}/records/{made['id']}", json={"type": "episode"})
    assert answer.status_code == 422, answer.text
    assert (answer.json()["error"]["code"], answer.json()["error"]["param"]) == ("memory_invalid", "type")
    got = (await gateway.admin.get(f"/v1/memories/{memory}/records/{made['id']}")).json()
    assert (got["type"], got["version"]) == ("note", 1)


async def test_an_episode_can_still_be_forgotten(gateway: Gateway) -> None:
    """Append-only is about revising: forgetting an episode closes it as it closes any record."""
    memory = (await gateway.root("Turns"))["id"]
    made = (await gateway.admin.post(f"/v1/memories/{memory}/records",
                                     json={"type": "episode", "content": "user: hi"})).json()
    forgot = await gateway.admin.delete(f"/v1/memories/{memory}/records/{made['id']}")
    assert forgot.status_code == 200, forgot.text
    assert forgot.json()["status"] == "forgotten"
