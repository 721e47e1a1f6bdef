"""A reference the reader may not follow is refused by the policy and audited once, with the policy's reason."""

from __future__ import annotations

from typing import Any

from policies import access
from tests.api._gateway import Gateway


async def _denials(gateway: Gateway, member_id: str, operation: str) -> list[dict[str, Any]]:
    await gateway.services.audit.flush()
    answer = await gateway.admin.get("/v1/audit", params={"limit": "1000", "principal": f"member:{member_id}"})
    assert answer.status_code == 200, answer.text
    return [e for e in answer.json()["data"] if e["operation"] == operation]


async def _hidden_reference(gateway: Gateway) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(public memory, restricted memory, a record in public referring to one in the restricted memory)."""
    root = await gateway.root()
    public = await gateway.child(gateway.admin, root["id"], "Public")
    private = await gateway.child(gateway.admin, root["id"], "Private", restricted=True)
    source = (await gateway.admin.post(f"/v1/memories/{private['id']}/records", json={"content": "src"})).json()
    made = (await gateway.admin.post(f"/v1/memories/{public['id']}/records", json={
        "content": "promoted", "references": [
            {"rel": "derived_from", "memory_id": private["id"], "record_id": source["id"]}]})).json()
    return public, private, made


def _policy_reason(gateway: Gateway, member_id: str, memory_id: str) -> str:
    principals = frozenset({f"member:{member_id}"})
    verdict = access.decide_read(gateway.services.store.tree, principals, memory_id)
    assert not verdict.allowed
    return verdict.reason


async def test_a_refused_reference_in_a_rendered_record_is_audited_with_the_policys_reason(
        gateway: Gateway) -> None:
    """GET of a record whose reference the reader may not follow logs a deny on the target memory, whose
    reason is the policy's own (the cutoff at the restricted memory), not a hand-written one."""
    public, private, made = await _hidden_reference(gateway)
    member_id, reader = await gateway.member("reader")
    await gateway.grant(public["id"], f"member:{member_id}", "read")
    seen = (await reader.get(f"/v1/memories/{public['id']}/records/{made['id']}")).json()
    assert seen["references"] == [{"record_id": made["references"][0]["record_id"], "available": False}]
    denials = await _denials(gateway, member_id, "records.reference")
    assert [(e["memory_id"], e["privilege"], e["decision"]) for e in denials] == [(private["id"], "read", "deny")]
    assert denials[0]["reason"] == _policy_reason(gateway, member_id, private["id"])
    assert f"cut off at restricted memory {private['id']}" in denials[0]["reason"]


async def test_a_listing_audits_each_refused_target_once(gateway: Gateway) -> None:
    """Two listed records referring into the same hidden memory make one deny entry, not one per record."""
    public, private, made = await _hidden_reference(gateway)
    again = {"content": "again", "references": [{"memory_id": private["id"], "record_id": made["references"][0][
        "record_id"]}]}
    assert (await gateway.admin.post(f"/v1/memories/{public['id']}/records", json=again)).status_code == 201
    member_id, reader = await gateway.member("reader")
    await gateway.grant(public["id"], f"member:{member_id}", "read")
    listing = (await reader.get(f"/v1/memories/{public['id']}/records")).json()
    assert [r["references"][0]["available"] for r in listing["data"]] == [False, False]
    denials = await _denials(gateway, member_id, "records.reference")
    assert [e["memory_id"] for e in denials] == [private["id"]]


async def test_a_refused_graph_edge_is_audited_with_the_policys_reason(gateway: Gateway) -> None:
    """The graph's unavailable edge is audited through the same reader, with the policy's reason."""
    public, private, _made = await _hidden_reference(gateway)
    member_id, reader = await gateway.member("reader")
    await gateway.grant(public["id"], f"member:{member_id}", "read")
    graph = (await reader.post(f"/v1/memories/{public['id']}/graph", json={})).json()
    assert [e["available"] for e in graph["edges"]] == [False]
    denials = await _denials(gateway, member_id, "graph.reference")
    assert [e["memory_id"] for e in denials] == [private["id"]]
    assert denials[0]["reason"] == _policy_reason(gateway, member_id, private["id"])


async def test_a_refused_reference_in_a_recall_result_is_audited_as_recall_reference(gateway: Gateway) -> None:
    """recall renders its hits through the same reader: the hidden target is logged as `recall.reference`."""
    public, private, made = await _hidden_reference(gateway)
    member_id, reader = await gateway.member("reader")
    await gateway.grant(public["id"], f"member:{member_id}", "read")
    answer = (await reader.post(f"/v1/memories/{public['id']}/recall", json={"text": "promoted"})).json()
    shown = [r["record"] for r in answer["results"] if r["record"]["id"] == made["id"]]
    assert [r["references"] for r in shown] == [[{"record_id": made["references"][0]["record_id"],
                                                  "available": False}]]
    denials = await _denials(gateway, member_id, "recall.reference")
    assert [(e["memory_id"], e["reason"]) for e in denials] == [
        (private["id"], _policy_reason(gateway, member_id, private["id"]))]
