"""Which harness an MCP session speaks for, and so where an unaddressed `memory_remember` goes (§9).

§9: a harness's `default_memory_id` "is where an unaddressed remember goes". An MCP session names its
harness in one of two ways, looked at afresh on every call (nothing is kept per session):

- the MCP URL carries it, `/mcp?harness_id=hrn_…`: that harness, which must be one whose agent the
  caller is (an administrator's key does not borrow another agent's harness);
- the URL carries none: the caller's only harness, if it is the agent of exactly one.

Both are read through memfed's own API with the caller's credential, so the harness routes' access
rule (an agent reads its own harnesses) is the one applied. Without a default to go to, the call is
refused with `memory_invalid` on `memory_id`, saying why; the messages carry ids and counts only, never
a harness's name (a member wrote it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from gateway.agent.mcp.api import Api, Caller, segment


class NoDefault(Exception):
    """Why an unaddressed remember has nowhere to go; the message is for the agent."""


def _mine(harness: object, caller: Caller) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(harness, Mapping) and harness.get("agent_member_id") == caller.principal.member_id


async def _named(api: Api, caller: Caller, harness_id: str) -> Mapping[str, Any]:
    answer = await api.call(caller, "GET", f"/v1/harnesses/{segment(harness_id)}")
    if not answer.ok or not _mine(answer.body, caller):
        # One answer for a harness that does not exist and one of another agent's.
        raise NoDefault("memory_id is required: the MCP URL names a harness (harness_id) that is not one "
                        "whose agent you are, so it gives no default memory.")
    body: Mapping[str, Any] = answer.body
    return body


async def _only(api: Api, caller: Caller) -> Mapping[str, Any]:
    answer = await api.call(caller, "GET", "/v1/harnesses")
    items = answer.body.get("data") if answer.ok and isinstance(answer.body, Mapping) else None
    mine = [h for h in items or [] if _mine(h, caller)]
    if not mine:
        raise NoDefault("memory_id is required: you are the agent of no harness, so there is no default memory "
                        "to write to.")
    if len(mine) > 1:
        raise NoDefault(f"memory_id is required: you are the agent of {len(mine)} harnesses. Name the one this "
                        "session is for in the MCP URL (/mcp?harness_id=…) to write to its default memory.")
    return mine[0]


async def default_memory(api: Api, caller: Caller) -> str:
    """The default_memory_id of the session's harness, or NoDefault saying why there is none."""
    harness = await (_named(api, caller, caller.harness_id) if caller.harness_id else _only(api, caller))
    default = harness.get("default_memory_id")
    if not isinstance(default, str) or not default:
        raise NoDefault(f"memory_id is required: harness {harness.get('id')} has no default memory. Name a "
                        "memory, or have default_memory_id set on the harness.")
    return default
