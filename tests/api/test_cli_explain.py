"""`memfed explain MEMORY PRINCIPAL` prints the same derivation as the access route."""

from __future__ import annotations

import json

import pytest

from gateway.cli import main
from tests.api._gateway import Gateway


async def test_explain_prints_grants_nodes_and_cutoff(gateway: Gateway, capsys: pytest.CaptureFixture[str]) -> None:
    """The command reads the state store directly and names each grant, its node and the cutoff."""
    root = await gateway.root()
    private = await gateway.child(gateway.admin, root["id"], "Private", restricted=True)
    member_id, _ = await gateway.member("x")
    grant = await gateway.grant(private["id"], f"member:{member_id}", "read")
    await gateway.grant(root["id"], f"member:{member_id}", "write")
    data_dir = str(gateway.services.config.data_dir)
    import asyncio

    code = await asyncio.to_thread(main, ["explain", "--data-dir", data_dir, private["id"], f"member:{member_id}"])
    out = capsys.readouterr().out
    assert code == 0
    assert f"member:{member_id} on {private['id']}: read" in out
    assert f"grant {grant['id']} on {private['id']}" in out
    assert f"inheritance stops at restricted memory {private['id']}" in out
    code = await asyncio.to_thread(main, ["explain", "--data-dir", data_dir, "--json", private["id"],
                                          f"member:{member_id}"])
    assert json.loads(capsys.readouterr().out)["privileges"] == ["read"]
    assert await asyncio.to_thread(main, ["explain", "--data-dir", data_dir, "hmem_none", "member:x"]) == 1
