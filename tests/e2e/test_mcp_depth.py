"""One deeply nested record never breaks the MCP read tools on its memory (issue 9, item 8, MCP part).

Such a record is written straight through the provider, as one written before the API limited the depth
of attributes, imported, or kept by a vendor would be: the tools must answer for it however it got there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from adapters.base import NewRecord, Part, Writer
from gateway.agent.mcp.depth import MAX_DEPTH, TOO_DEEP, Cut, cut
from tests.e2e._mcp_client import Served, call, serving, text_of


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path) as server:
        yield server


def nested(depth: int) -> Any:
    value: Any = "the bottom"
    for _ in range(depth):
        value = {"a": value}
    return value


def depth_of(value: Any) -> int:
    level, frontier = 0, [value]
    while frontier:
        level += 1
        frontier = [v for item in frontier if isinstance(item, dict | list)
                    for v in (item.values() if isinstance(item, dict) else item)]
    return level


async def deep_memory(served: Served, depth: int) -> tuple[str, str, str]:
    """A memory holding a plain record and one whose attributes nest `depth` levels: (memory, plain, deep)."""
    gw = served.gw
    root = await gw.root("Company")
    plain = await gw.admin.post(f"/v1/memories/{root['id']}/records",
                                json={"type": "note", "content": "Acme renews in March.", "attributes": {"k": 1}})
    assert plain.status_code == 201, plain.text
    handle = gw.services.providers.get("local")
    assert handle is not None
    deep = await handle.provider.remember(root["id"], NewRecord(
        type="note", content=(Part(type="text", text="Acme deep notes"),), attributes={"tree": nested(depth)},
        written_by=Writer("member", "mbr_old", "human"), written_at=datetime.now(UTC)))
    return root["id"], plain.json()["id"], deep.id


def records_in(structured: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for item in structured.get("data") or structured.get("results") or structured.get("nodes") or [structured]:
        record = item.get("record", item)
        found[record["id"]] = record
    return found


@pytest.mark.parametrize("depth", [260, 900])
async def test_a_deeply_nested_record_never_fails_the_read_tools(served: Served, depth: int) -> None:
    """list, recall, get, history and graph all answer: every record is there, the plain one whole, the
    deep one with what lies below the depth bound cut and marked, and the answer says which record."""
    memory, plain, deep = await deep_memory(served, depth)
    async with served.session(served.gw.admin_key) as session:
        answers = {
            "list": await call(session, "memory_list", memory_id=memory, show="records"),
            "recall": await call(session, "memory_recall", memory_id=memory, text="Acme"),
            "get": await call(session, "memory_get", memory_id=memory, record_id=deep),
            "history": await call(session, "memory_get", memory_id=memory, record_id=deep, history=True),
            "graph": await call(session, "memory_graph", memory_id=memory),
        }
    for name, answer in answers.items():
        assert not answer.is_error, (name, text_of(answer))
        structured = answer.structured_content
        assert structured is not None
        records = records_in(structured)
        assert deep in records, name
        assert "  | Acme deep notes" in text_of(answer), name
        shown = records[deep]["attributes"]["tree"]
        assert depth_of(shown) < MAX_DEPTH and TOO_DEEP in str(shown), name
        assert structured["x.memfed"]["too_deep"]["records"] == [deep], name
        assert f"nested deeper than {MAX_DEPTH} levels" in text_of(answer), name
        if name in ("list", "recall", "graph"):
            assert records[plain]["attributes"] == {"k": 1}, name


def test_the_cut_keeps_what_lies_above_the_bound_and_names_each_record_once_in_order() -> None:
    """Two deep records and a deep value outside any record: every value within MAX_DEPTH levels is kept
    as it was, each record is named once in the order the answer lists it, the other value is counted."""
    deep = nested(MAX_DEPTH + 50)
    body: dict[str, Any] = {"data": [
        {"object": "memory.record", "id": "hrec_1", "attributes": {"x": deep, "y": nested(MAX_DEPTH + 9)}},
        {"object": "memory.record", "id": "hrec_2", "attributes": {"k": [1, {"b": 2}]}},
        {"object": "memory.record", "id": "hrec_3", "attributes": {"x": deep}},
    ], "rows": [deep], "next": None}
    shaped = cut(body)
    assert shaped.records == ("hrec_1", "hrec_3") and shaped.elsewhere == 1
    assert shaped.value["data"][1] == body["data"][1] and shaped.value["next"] is None
    assert depth_of(shaped.value) == MAX_DEPTH + 1  # MAX_DEPTH levels of containers, then a leaf
    kept = shaped.value["data"][0]["attributes"]["x"]
    for _ in range(MAX_DEPTH - 4):
        kept = kept["a"]
    assert kept == TOO_DEEP
    assert cut({"a": [1, "two", None]}) == Cut({"a": [1, "two", None]})
