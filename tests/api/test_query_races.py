"""A named query deleted while another request defines it: the definition answers 404, never a 500."""

from __future__ import annotations

import pytest

from gateway.state.queries import NamedQuery
from tests.api._gateway import Gateway

COUNTS = {"params": {"type": "object", "properties": {}}, "language": "sql",
          "body": "SELECT type, count(*) AS n FROM records GROUP BY type ORDER BY type"}


async def test_a_query_deleted_between_its_definition_and_the_read_back_answers_not_found(
        gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    """PUT writes the definition, then a DELETE lands before the answer reads it back: 404
    memfed_query_not_found (the query is indeed gone), not a 500 from rendering a row that is not there."""
    memory = (await gateway.root("Accounts"))["id"]
    repository = gateway.services.store.queries
    read = repository.get

    async def lose_it_then_read(memory_id: str, name: str) -> NamedQuery | None:
        await repository.delete(memory_id, name)  # another request's delete, landing after this one's write
        return await read(memory_id, name)

    monkeypatch.setattr(repository, "get", lose_it_then_read)
    answer = await gateway.admin.put(f"/v1/memories/{memory}/queries/counts", json=COUNTS)
    monkeypatch.undo()
    assert (answer.status_code, answer.json()["error"]["code"]) == (404, "memfed_query_not_found"), answer.text
    assert (await gateway.admin.get(f"/v1/memories/{memory}/queries")).json()["data"] == []
