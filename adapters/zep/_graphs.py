"""Which Zep graph a memory is: one standalone graph per memory, created on its first write.

v4 names graphs by a UUID Zep generates (`POST graphs` takes no id), so memfed keeps memory -> graph UUID
in a file of the provider's own data directory, and puts the memory id in the graph's `name`
(`memfed:<memory id>`) so the graph is found again (`graphs/list {search}`) when that file is gone or
another gateway made the graph. v3 takes the caller's `graph_id`, so the name is the id and nothing
needs keeping. Two writes racing for a memory's first graph take one lock and look again inside it.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from pathlib import Path

from adapters.base import ProviderUnavailable
from adapters.zep._dialect import Dialect
from adapters.zep._http import ABSENT, Http
from adapters.zep._shapes import Graph

ABSENT_FOR = 2.0


class Graphs:
    def __init__(self, http: Http, dialect: Dialect, data_dir: Path | None) -> None:
        self._http = http
        self._dialect = dialect
        self._file = data_dir / "zep-graphs.json" if data_dir is not None else None
        self._known: dict[str, Graph] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._refreshed = float("-inf")  # when v4's listing of every memfed graph was last read
        self._refreshing = asyncio.Lock()
        if self._file is not None and self._file.exists():
            raw = json.loads(self._file.read_text())
            self._known = {m: Graph(g["ref"], g["name"]) for m, g in raw.items()}

    def name(self, memory_id: str) -> str:
        return ("memfed:" if self._dialect.name == "v4" else "memfed-") + memory_id

    def _keep(self) -> None:
        if self._file is None:
            return
        self._file.parent.mkdir(parents=True, exist_ok=True)
        scratch = self._file.with_suffix(".tmp")
        scratch.write_text(json.dumps({m: {"ref": g.ref, "name": g.name} for m, g in self._known.items()}))
        os.chmod(scratch, 0o600)
        scratch.replace(self._file)

    async def find(self, memory_id: str) -> Graph | None:
        """The memory's graph, or None when it has none yet (nothing was written there)."""
        if (known := self._known.get(memory_id)) is not None:
            return known
        await self._refresh()
        return self._known.get(memory_id)

    async def _refresh(self) -> None:
        """Every memfed graph of the project, by name (v4 `graphs/list {search: "memfed:"}`, v3
        `graph/list-all?search=memfed-`, paged): one listing answers for every memory not yet known, where
        a lookup per memory would cost a call per unwritten memory on every recall. At most once per
        ABSENT_FOR seconds, and one at a time."""
        if time.monotonic() - self._refreshed < ABSENT_FOR:
            return
        async with self._refreshing:
            if time.monotonic() - self._refreshed < ABSENT_FOR:
                return
            prefix = self.name("")
            cursor: str | None = None
            for _ in range(10_000):
                body = await self._http.send(self._dialect.list_graphs(prefix, cursor))
                try:
                    graphs, cursor = self._dialect.graphs_page(body)
                except ValueError as exc:
                    raise ProviderUnavailable(f"zep listed graphs in a shape memfed cannot read: {exc}") from exc
                for graph in graphs:
                    if graph.name.startswith(prefix):
                        self._known.setdefault(graph.name.removeprefix(prefix), graph)
                if cursor is None:
                    break
            self._refreshed = time.monotonic()
            self._keep()

    async def ensure(self, memory_id: str) -> Graph:
        """The memory's graph, created if it has none."""
        lock = self._locks.setdefault(memory_id, asyncio.Lock())
        async with lock:
            if (graph := await self.find(memory_id)) is not None:
                return graph
            name = self.name(memory_id)
            # A key of its own per creation: a memory dropped and written again needs a new graph, and a
            # key Zep still holds would answer with the graph it dropped.
            key = f"memfed-graph-{uuid.uuid4().hex}"
            body = await self._http.send(self._dialect.create_graph(name, "a memfed memory", key))
            try:
                graph = self._dialect.graph_from(body)
            except ValueError as exc:
                raise ProviderUnavailable(f"zep created a graph memfed cannot read: {exc}") from exc
            self._known[memory_id] = graph
            self._keep()
            return graph

    async def vanished(self, memory_id: str, graph: Graph) -> bool:
        """Whether the memory's graph is gone from Zep (deleted there, outside memfed): asked after a 404,
        so a graph kept in the data directory that Zep no longer has is forgotten, not used for ever."""
        body = await self._http.send(self._dialect.get_graph(graph), absent_ok=True)
        if body is not ABSENT:
            return False
        if self._known.get(memory_id) == graph:
            self.forget(memory_id)
        return True

    def forget(self, memory_id: str) -> None:
        self._refreshed = time.monotonic()  # the graph is gone: a listing now may still show it
        if self._known.pop(memory_id, None) is not None:
            self._keep()
