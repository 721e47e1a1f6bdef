"""Probes and explanations stay inside the caller's reach: a guessed parent, a derivation, a logged
reason or a delete's count never tells a caller about memories or grants above what it can see."""

from __future__ import annotations

import json

from tests.api._gateway import Gateway

RANDOM_MEMORY = "hmem_" + "5" * 32
ABOVE = "inherited from above your reach"


async def test_a_guessed_hidden_parent_reads_like_a_random_id(gateway: Gateway) -> None:
    """PUT parent_id = the true (hidden) parent answers exactly as a random id does, and parent_id null
    (what the caller is shown) is a no-op, as on a root: nothing tells the hidden parent's id apart."""
    root = await gateway.root()
    x = await gateway.child(gateway.admin, root["id"], "X")
    member_id, client = await gateway.member("owner")
    await gateway.grant(x["id"], f"member:{member_id}", "read", "write", "delete")
    own_root = await gateway.root("Own")
    await gateway.grant(own_root["id"], f"member:{member_id}", "read", "write", "delete")

    guessed = await client.put(f"/v1/memories/{x['id']}", json={"parent_id": root["id"]})
    random = await client.put(f"/v1/memories/{x['id']}", json={"parent_id": RANDOM_MEMORY})
    assert (guessed.status_code, guessed.json()) == (random.status_code, random.json())
    assert guessed.status_code == 404
    shown = await client.put(f"/v1/memories/{x['id']}", json={"parent_id": None})
    on_a_root = await client.put(f"/v1/memories/{own_root['id']}", json={"parent_id": None})
    assert shown.status_code == on_a_root.status_code == 200, (shown.text, on_a_root.text)
    assert gateway.services.store.tree.parent_of(x["id"]) == root["id"]


async def test_an_explanation_stops_at_the_callers_reach(gateway: Gateway) -> None:
    """A holder of delete on A asks why S holds what it holds on B (below A): the path stops at A, the
    root's grant is only "inherited from above your reach", and nothing names the root or that grant."""
    root = await gateway.root()
    a = await gateway.child(gateway.admin, root["id"], "A")
    b = await gateway.child(gateway.admin, a["id"], "B")
    subject_id, _ = await gateway.member("subject")
    hidden = await gateway.grant(root["id"], f"member:{subject_id}", "read")
    visible = await gateway.grant(b["id"], f"member:{subject_id}", "write")
    viewer_id, viewer = await gateway.member("viewer")
    await gateway.grant(a["id"], f"member:{viewer_id}", "delete")

    answer = await viewer.get(f"/v1/memories/{b['id']}/access", params={"principal": f"member:{subject_id}"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["privileges"] == ["read", "write"]
    assert body["path"] == [b["id"], a["id"]]
    assert [(g["grant_id"], g["memory_id"], g["privileges"]) for g in body["grants"]] == [
        (visible["id"], b["id"], ["write"])]
    assert body["inherited_from_above_reach"] is True
    assert body["reasons"]["read"] == f"allowed: {ABOVE}"
    assert body["reasons"]["write"].startswith(f"allowed by grant {visible['id']} ")
    assert root["id"] not in answer.text and hidden["id"] not in answer.text
    assert None not in body["path"] and all(g["grant_id"] and g["memory_id"] for g in body["grants"])

    admin_view = (await gateway.admin.get(f"/v1/memories/{b['id']}/access",
                                          params={"principal": f"member:{subject_id}"})).json()
    assert admin_view["path"] == [b["id"], a["id"], root["id"]]
    assert {g["grant_id"] for g in admin_view["grants"]} == {hidden["id"], visible["id"]}


async def test_a_cutoff_above_the_callers_reach_is_not_named(gateway: Gateway) -> None:
    """A restricted memory above the caller's reach cuts the subject's inheritance: the caller is not
    told there is one (no cutoff, no "cut off" in the reasons, no id)."""
    root = await gateway.root()
    walled = await gateway.child(gateway.admin, root["id"], "Walled", restricted=True)
    a = await gateway.child(gateway.admin, walled["id"], "A")
    subject_id, _ = await gateway.member("subject")
    await gateway.grant(root["id"], f"member:{subject_id}", "read")
    viewer_id, viewer = await gateway.member("viewer")
    await gateway.grant(a["id"], f"member:{viewer_id}", "delete")
    answer = await viewer.get(f"/v1/memories/{a['id']}/access", params={"principal": f"member:{subject_id}"})
    body = answer.json()
    assert body["privileges"] == [] and body["path"] == [a["id"]]
    assert body["cutoff_at"] is None and body["inheritance_cut"] is False
    assert "cut off" not in json.dumps(body["reasons"])
    assert walled["id"] not in answer.text and root["id"] not in answer.text


async def test_logged_reasons_stop_at_the_readers_reach(gateway: Gateway) -> None:
    """A holder of delete on A reads the log of A: a decision made by a grant on the root above it reads
    "inherited from above your reach", without that grant's id, principal or privileges."""
    root = await gateway.root()
    a = await gateway.child(gateway.admin, root["id"], "A")
    subject_id, subject = await gateway.member("subject")
    hidden = await gateway.grant(root["id"], f"member:{subject_id}", "read", "write")
    viewer_id, viewer = await gateway.member("viewer")
    await gateway.grant(a["id"], f"member:{viewer_id}", "read", "delete")
    assert (await subject.post(f"/v1/memories/{a['id']}/recall", json={"text": "x"})).status_code == 200
    await gateway.services.audit.flush()

    page = (await viewer.get("/v1/audit", params={"memory_id": a["id"], "principal": f"member:{subject_id}",
                                                  "limit": "100"})).json()
    reasons = [d["reason"] for d in page["data"] if d["decision"] == "allow"]
    assert reasons and all(r.endswith(ABOVE) for r in reasons), reasons
    text = json.dumps(page)
    assert hidden["id"] not in text and root["id"] not in text and "gives" not in text
    everything = (await gateway.admin.get("/v1/audit", params={"principal": f"member:{subject_id}"})).json()
    assert hidden["id"] in json.dumps(everything)  # an admin reads the whole derivation


async def test_delete_counts_only_the_memories_the_caller_could_see(gateway: Gateway) -> None:
    """memories_deleted counts what the caller could see; that hidden ones went too is said, not counted."""
    root = await gateway.root()
    member_id, client = await gateway.member("owner")
    await gateway.grant(root["id"], f"member:{member_id}", "create")
    x = await gateway.child(client, root["id"], "X")
    await gateway.child(client, x["id"], "Open")
    for i in range(3):
        await gateway.child(gateway.admin, x["id"], f"Walled {i}", restricted=True)
    y = await gateway.child(client, root["id"], "Y")
    await gateway.child(client, y["id"], "Open too")

    deleted = (await client.delete(f"/v1/memories/{x['id']}")).json()
    assert deleted == {"id": x["id"], "object": "memory", "deleted": True, "memories_deleted": 2,
                       "unseen_memories_deleted": True}
    plain = (await client.delete(f"/v1/memories/{y['id']}")).json()
    assert (plain["memories_deleted"], plain["unseen_memories_deleted"]) == (2, False)
