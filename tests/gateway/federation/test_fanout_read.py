"""The fan-out reads each provider's answer as it comes in (gateway/federation/fanout.py `_read`): a hit
outside the memories the provider was asked about is dropped and reported, each record counts once, and
the union ranks as it would if every answer were read at the end."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, cast

from adapters.base import Capabilities, Hit, Part, RecallAnswer, RecallQuery, Record, Writer
from adapters.records import RecordTime
from gateway.base.config import ProviderConfig
from gateway.federation import fanout
from gateway.federation.providers import Providers


def _hit(memory_id: str, record_id: str, text: str) -> Hit:
    record = Record(record_id, memory_id, "note", (Part(type="text", text=text),), Writer("member", "mbr_a"),
                    RecordTime(datetime(2026, 1, 1, tzinfo=UTC)))
    return Hit(record, 1.0, ("query",))


class _Handle:
    def __init__(self, hits: list[Hit], adapter: str = "mem0", asked: list[str] | None = None) -> None:
        self._hits = hits
        self.config = ProviderConfig(name="p", adapter=adapter)
        self._asked = asked

    def capabilities(self) -> Capabilities:
        return Capabilities(isolation="enforced_filter", derivation="none", signals=("query",))

    async def call(self, fn: Callable[[Any], Awaitable[Any]], *, read: bool, deadline: float | None = None) -> Any:
        if self._asked is not None:
            self._asked.append(self.config.adapter)
        return RecallAnswer(tuple(self._hits))


class _Providers(dict[str, _Handle]):
    pass


async def test_a_hit_outside_the_memories_asked_is_dropped_and_said() -> None:
    providers = _Providers(
        p1=_Handle([_hit("m1", "a", "renewal of acme"), _hit("m9", "x", "renewal secret"),
                    _hit("m1", "a", "renewal of acme")]),
        p2=_Handle([_hit("m2", "b", "acme renewal renewal")]),
    )
    answer = await fanout.recall(cast(Providers, providers), {"p1": ["m1"], "p2": ["m2"]},
                                 RecallQuery(query="renewal", limit=5))
    assert sorted((f.hit.record.memory_id, f.hit.record.id) for f in answer.hits) == [("m1", "a"), ("m2", "b")]
    assert "provider:p1:answered_outside_scope" in answer.degraded
    assert not any("p2" in d for d in answer.degraded)
    assert answer.hits[0].hit.record.id == "b"  # more of the question's words, in the union's statistics


async def test_the_vendors_are_asked_before_the_embedded_provider_and_read_in_the_plans_order() -> None:
    """The embedded provider's search is work in this process: asked first, it held the vendors' calls
    back. It is asked last; the answer is the same as in the plan's order (its entries first)."""
    asked: list[str] = []
    providers = _Providers(
        local=_Handle([_hit("m0", "z", "renewal")], "local", asked),
        p1=_Handle([_hit("m1", "a", "renewal")], "mem0", asked),
        p2=_Handle([_hit("m2", "b", "renewal"), _hit("m9", "x", "renewal")], "zep", asked),
    )
    answer = await fanout.recall(cast(Providers, providers), {"local": ["m0"], "p1": ["m1"], "p2": ["m2"]},
                                 RecallQuery(query="renewal", limit=5))
    assert asked == ["mem0", "zep", "local"]
    assert [f.provider for f in answer.hits] == ["local", "p1", "p2"]  # equal scores: the plan's order
    assert list(answer.timings) and set(answer.timings) == {"local", "p1", "p2"}
    assert "provider:p2:answered_outside_scope" in answer.degraded
