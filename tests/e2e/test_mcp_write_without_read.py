"""The MCP write tools with an agent that may write a memory but not read it (issue 9 item 6): the API
answers an acknowledgement in place of the record, and the tool says why no record is shown."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.agent.mcp.api import Answer, Caller
from gateway.agent.mcp.run import run_tool
from gateway.identity.auth import Principal

ACK = {"object": "memory.record.acknowledgement", "id": "hrec_" + "a" * 32, "memory_id": "hmem_a", "version": 2,
       "status": "forgotten"}
CALLER = Caller(Principal("mbr_w", "writer", "agent", False, ()), "mf_stub")


class Acknowledging:
    """The API as a stub that answers every write with the acknowledgement above."""

    async def call(self, caller: Any, method: str, path: str, *, params: Any = None, body: Any = None) -> Answer:
        return Answer(method, path, 200, dict(ACK))


@pytest.mark.parametrize(("tool", "args"), [
    ("memory_revise", {"memory_id": "hmem_a", "record_id": "r", "title": "t"}),
    ("memory_forget", {"memory_id": "hmem_a", "record_id": "r"}),
    ("memory_remember", {"memory_id": "hmem_a", "content": "c"}),
])
async def test_a_write_tool_says_the_record_is_not_shown_to_a_writer_who_cannot_read(
    tool: str, args: dict[str, Any]
) -> None:
    """The tool's text names the version written and says the record is withheld; the structured answer
    is the acknowledgement, with nothing of the record."""
    result = await run_tool(Acknowledging(), CALLER, tool, args)
    assert not result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "(version 2)" in text and "may write this memory but not read it" in text
    assert set(result.structured_content or {}) >= set(ACK) and "content" not in (result.structured_content or {})
