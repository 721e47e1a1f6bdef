"""What Zep does in the background, and its own graph, as the gateway asks for them.

- `derivation_pending` (adapters/deriving.py): an episode is processed when its v4 ingestion task ends
  (the task is kept in the data dir, `_ingests`, so a restart or another process polls it too), or, where
  no task is known (v3, a record dropped from that bounded file), when Zep says `processed: true` on it;
  until then the facts it will yield are not there, and an observe job is not `completed`.
- `neighbourhood` (adapters/graph.py): the records around one record in Zep's graph, from Zep's own
  subgraph (`POST graphs/{g}/subgraph` in v4, `graph/subgraph` in v3) seeded with the record's nodes (an
  entity's node, a fact's two ends), `hops` deep.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Sequence
from typing import Any

from adapters.base import ProviderUnavailable, Record
from adapters.zep import _records as records
from adapters.zep._ingests import Ingests
from adapters.zep._reads import ZepReads
from adapters.zep._shapes import Written
from adapters.zep._tasks import DONE

log = logging.getLogger("memfed.adapters.zep")


class ZepDerivation(ZepReads):
    _ingesting: Ingests  # record id -> the v4 ingestion task of its episode and how it ended

    async def _send(self, call: Any, *, absent_ok: bool = False) -> Any:
        raise NotImplementedError

    async def derivation_pending(self, memory_id: str, record_ids: Sequence[str]) -> bool:
        """v4 answers an episode's add with its ingestion task: while it may run, one poll of
        `GET tasks/{uuid}` says whether Zep is still at it; once it ended, nothing is asked. Where no task
        is known (v3, or dropped from the bounded file), the episode's own `processed` flag, from a
        listing of the graph."""
        unknown = []
        for record_id in record_ids:
            known = self._ingesting.get(record_id)
            if known is None:
                unknown.append(record_id)
                continue
            task_uuid, ended = known
            if ended is not None:
                continue
            try:
                task = self._dialect.task_from(await self._send(self._dialect.task(task_uuid)))
            except ValueError as exc:
                raise ProviderUnavailable(f"zep answered a task poll memfed cannot read: {exc}") from exc
            if task.status not in DONE:
                return True
            if task.status != "succeeded":
                log.warning("zep ingestion task %s ended %s: %s", task.uuid, task.status, task.error)
            self._ingesting.ended(record_id, task_uuid, task.status)
        if not unknown:
            return False
        loaded = await self._load(memory_id)
        for record_id in unknown:
            chain = loaded.get(record_id)
            if chain and chain[-1].kind == "episode" and chain[-1].item.get("processed") is False:
                return True
        return False

    def _ingestion_started(self, record_id: str, written: Written) -> None:
        if written.task is not None and written.item.get("processed") is False:
            self._ingesting.started(record_id, written.task.uuid)

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
