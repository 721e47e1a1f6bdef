"""A harness deleted while another request changes its settings: the change answers 404, never a 500."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api._gateway import Gateway


async def test_settings_changed_on_a_harness_deleted_meanwhile_answer_not_found(gateway: Gateway,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """PUT /memories reads the harness, then a delete lands before its write: 404 memfed_harness_not_found."""
    agent_id, _agent = await gateway.member("bot", "agent")
    made = await gateway.admin.post("/v1/harnesses", json={"name": "support-bot", "agent_member_id": agent_id})
    harness = made.json()
    repository = gateway.services.store.harnesses
    read = repository.get

    async def read_then_lose_it(harness_id: str) -> Any:
        row = await read(harness_id)
        await repository.delete(harness_id)  # another request's delete, landing after this read
        return row

    monkeypatch.setattr(repository, "get", read_then_lose_it)
    answer = await gateway.admin.put(f"/v1/harnesses/{harness['id']}/memories", json={"observe": False})
    monkeypatch.undo()
    assert (answer.status_code, answer.json()["error"]["code"]) == (404, "memfed_harness_not_found"), answer.text
    assert (await gateway.admin.get(f"/v1/harnesses/{harness['id']}")).status_code == 404
