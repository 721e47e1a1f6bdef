"""What Zep does in the background, and its own graph, as the gateway asks for them.

- `derivation_pending` (adapters/deriving.py): an episode is processed when Zep says `processed: true`
  on it; until then the facts it will yield are not there, and an observe job is not `completed`.
- `neighbourhood` (adapters/graph.py): the records around one record in Zep's graph, from Zep's own
  subgraph (`POST graphs/{g}/subgraph` in v4, `graph/subgraph` in v3) seeded with the record's nodes (an
  entity's node, a fact's two ends), `hops` deep.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from adapters.base import ProviderUnavailable, Record
from adapters.zep import _records as records
from adapters.zep._reads import ZepReads


class ZepDerivation(ZepReads):
    async def _send(self, call: Any, *, absent_ok: bool = False) -> Any:
        raise NotImplementedError

    async def derivation_pending(self, memory_id: str, record_ids: Sequence[str]) -> bool:
        loaded = await self._load(memory_id)
        for record_id in record_ids:
            chain = loaded.get(record_id)
            if chain and chain[-1].kind == "episode" and chain[-1].item.get("processed") is False:
                return True
        return False

    async def neighbourhood(self, memory_id: str, record_id: str, hops: int) -> Sequence[Record] | None:
        graph = await self._graph(memory_id)
        if graph is None:
            return None
        loaded = await self._load(memory_id)
        chain = loaded.get(record_id)
        if not chain:
            return None
        start = chain[-1]
        if start.kind == "node":
            seeds = [start.uuid]
        elif start.kind == "edge":
            seeds = [str(start.item.get(k)) for k in ("source_node_uuid", "target_node_uuid") if start.item.get(k)]
        else:
            return [start.record]  # an episode is no node of Zep's graph: it stands alone there
        body = await self._send(self._dialect.subgraph(graph, seeds, max(hops, 1)))
        try:
            nodes, edges = self._dialect.subgraph_from(body)
        except ValueError as exc:
            raise ProviderUnavailable(f"zep answered a subgraph in a shape memfed cannot read: {exc}") from exc
        by_uuid = {v.uuid: c[-1].record for c in loaded.values() for v in c}
        out: builtins.list[Record] = [start.record]
        for item in (*nodes, *edges):
            if records.is_anchor(item):
                continue
            found = by_uuid.get(str(item["uuid"]))
            if found is not None and found.status == "active" and found.id not in {r.id for r in out}:
                out.append(found)
        return out
