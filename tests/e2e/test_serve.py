"""End to end: `memfed serve` as a real process, two members' keys, and what one may not read the other never sees."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e._process import ServeProcess

pytestmark = pytest.mark.e2e
ADMIN_KEY = "mf_e2e_admin_key_for_tests_only_0123456789"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path / "data", admin_key=ADMIN_KEY)
    yield process
    process.stop()


def client(server: ServeProcess, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=10.0)


def make_member(admin: httpx.Client, name: str, type_: str) -> tuple[str, str]:
    member = admin.post("/v1/members", json={"name": name, "type": type_}).json()
    return member["id"], admin.post(f"/v1/members/{member['id']}/keys").json()["key"]


def test_two_members_never_see_each_others_records(server: ServeProcess) -> None:
    """Alice and Bob each granted one branch: recall, listing and get never show the other's."""
    admin = client(server, ADMIN_KEY)
    root = admin.post("/v1/memories", json={"name": "Company"}).json()
    a_branch = admin.post("/v1/memories", json={"name": "Alice's", "parent_id": root["id"],
                                                "restricted": True}).json()
    b_branch = admin.post("/v1/memories", json={"name": "Bob's", "parent_id": root["id"],
                                                "restricted": True}).json()
    alice_id, alice_key = make_member(admin, "alice", "human")
    bob_id, bob_key = make_member(admin, "bob", "agent")
    for branch, member in ((a_branch, alice_id), (b_branch, bob_id)):
        made = admin.post(f"/v1/memories/{branch['id']}/grants",
                          json={"principal": f"member:{member}", "privileges": ["read", "write"]})
        assert made.status_code == 201
    alice, bob = client(server, alice_key), client(server, bob_key)
    a_record = alice.post(f"/v1/memories/{a_branch['id']}/records", json={"content": "alice secret plan"}).json()
    b_record = bob.post(f"/v1/memories/{b_branch['id']}/records", json={"content": "bob secret plan"}).json()
    assert a_record["written_by"]["id"] == alice_id and b_record["written_by"]["type"] == "agent"

    everything = admin.post(f"/v1/memories/{root['id']}/recall", json={"text": "secret plan"}).json()
    assert len(everything["results"]) == 2  # the admin created both branches

    for me, mine, other, other_record in ((alice, a_branch, b_branch, b_record),
                                          (bob, b_branch, a_branch, a_record)):
        entry = me.get("/v1/memories").json()
        assert [m["id"] for m in entry["data"]] == [mine["id"]]
        assert me.get(f"/v1/memories/{root['id']}").status_code == 404
        assert me.post(f"/v1/memories/{root['id']}/recall", json={"text": "secret"}).status_code == 404
        found = me.post(f"/v1/memories/{mine['id']}/recall", json={"text": "secret plan"}).json()
        assert [r["memory"]["id"] for r in found["results"]] == [mine["id"]]
        assert other["id"] not in str(found)
        hidden = me.get(f"/v1/memories/{other['id']}")
        missing = me.get("/v1/memories/hmem_ffffffffffffffffffffffffffffffff")
        assert hidden.status_code == missing.status_code == 404 and hidden.json() == missing.json()
        through_mine = me.get(f"/v1/memories/{mine['id']}/records/{other_record['id']}")
        assert through_mine.status_code == 404
        assert "secret" not in through_mine.text
    assert "uhp-version" in {k.lower() for k in admin.get("/v1/uhp").headers}


def test_serve_prints_a_generated_admin_key_once(tmp_path: Path) -> None:
    """Without MEMFED_ADMIN_KEY the first start prints a key that works; a restart prints none."""
    data = tmp_path / "data"
    first = ServeProcess(data)
    try:
        match = re.search(r"API key \(shown once\): (mf_\S+)", first.output())
        assert match, first.output()
        key = match.group(1)
        assert client(first, key).get("/v1/members/me").json()["admin"] is True
    finally:
        first.stop()
    second = ServeProcess(data)
    try:
        assert "shown once" not in second.output()
        assert client(second, key).get("/v1/members/me").status_code == 200
        assert key not in second.output().replace(match.group(0), "")
    finally:
        second.stop()
