"""The Zep adapter: UHP Memories on Zep's temporal knowledge graph, API v4 or v3.

A memory is a standalone Zep graph (`isolation: container`), created on the memory's first write
(`_graphs`). A record's versions are graph objects (`_records`): a fact an edge between two nodes (its
`subject`/`object` references' entity nodes when it names them), an entity a node, every other type an
episode. Zep derives edges and nodes from episodes in the background (`derivation: background`); what it
derived reads as records written by the provider, never as stated ones.

Versions: a revise writes the next version as a new object and closes the one before: v3 patches the old
edge's `invalid_at`/`expired_at` (world and system time), v4 (whose temporal fields are set only at
creation) marks the old object's attributes (`memfed_closed_at`, with `superseded_by`) and gives the new
edge its times at creation. Forget is the same with a closing version (a fact's closing edge is created
already invalid), so history keeps every version. Erase deletes every version's object (v4: each delete's
task polled to its end); what Zep keeps after (the edges it derived from an erased episode) is reported
in `unreachable`.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import httpx

from adapters.base import (
    Capabilities,
    Erasure,
    ErasureIncomplete,
    NewRecord,
    ProviderError,
    ProviderRejected,
    ProviderUnavailable,
    Record,
    RecordNotFound,
    RecordTime,
    Revision,
    Support,
    Unsupported,
    Writer,
)
from adapters.records import words_of as render_text
from adapters.versioning import not_before, refuse_following, revision_of, tombstone
from adapters.zep import _records as records
from adapters.zep._derive import ZepDerivation
from adapters.zep._dialect import DIALECTS
from adapters.zep._graphs import Graphs
from adapters.zep._http import Http, NotFound, Secret
from adapters.zep._ingests import Ingests
from adapters.zep._pushdown import ATTRIBUTE_NAME
from adapters.zep._recall import ZepRecall
from adapters.zep._shapes import ANCHOR_LABEL, ANCHOR_NAME, KINDS, METADATA_KEYS, Graph, Kind, NewEdge, Written, iso
from adapters.zep._tasks import settle

log = logging.getLogger("memfed.adapters.zep")

CLOUD_URL = "https://api.getzep.com"
_OPTIONS = {"base_url", "variant", "timeout", "calls_at_once", "task_wait", "task_poll", "filter_attributes"}


def _capabilities(variant: str, filter_attributes: Sequence[str]) -> Capabilities:
    # Zep's search is hybrid (BM25 with embeddings): words alone are not asked for on their own. v3
    # listings take no filter, so memfed judges all of `filters`; v4 is sent `type` and the named
    # attributes where it can judge them (`_pushdown`), and each answer's `degraded` says what memfed
    # judged alone, so the signal is not declared emulated as a whole.
    fields: tuple[tuple[str, Support], ...] = (("time.*", "emulated"), ("attributes.*", "emulated"))
    if variant == "v4":
        fields = (("type", "native"), *((f"attributes.{a}", "native") for a in filter_attributes), *fields)
    else:
        fields = (("type", "emulated"), *fields)
    return Capabilities(
        isolation="container",
        derivation="background",
        signals=("query", "text", "filters"),
        emulated_signals=("text",) if variant == "v4" else ("text", "filters"),
        filter_fields=fields,
        keeps_episodes=True,
        observe_answers="job",
        history_content="versions",
        history_structure="versions",
        revise="native",
        forget="native",
        erase_unreachable="reported",
        as_of=True,
        graph_entities="derived",
        media=("*/*",),
        bytes="referenced",
        searches_many_memories=False,
    )


def _option_names(raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str) or not isinstance(raw, Sequence) or not all(isinstance(n, str) for n in raw):
        raise ValueError("zep option 'filter_attributes' must be a list of attribute keys")
    return tuple(raw)


def _filter_attributes(names: Sequence[str]) -> tuple[str, ...]:
    """The attribute keys kept as their own metadata keys; refused when more than the metadata keys left
    can hold, or not a plain name (a Zep metadata key; a `degraded` token)."""
    kept = tuple(dict.fromkeys(names))
    if len(kept) > records.MAX_FILTER_ATTRIBUTES:
        raise ValueError(f"zep option 'filter_attributes' names at most {records.MAX_FILTER_ATTRIBUTES} keys "
                         f"(v4 keeps {METADATA_KEYS} metadata keys, memfed uses the others)")
    bad = [n for n in kept if not ATTRIBUTE_NAME.fullmatch(n)]
    if bad:
        raise ValueError(f"zep option 'filter_attributes': {bad[0]!r} is not a key of letters, digits and _")
    return kept


class ZepProvider(ZepRecall, ZepDerivation):
    """A `Provider` over one Zep project, through API v4 or v3."""

    def __init__(self, client: httpx.AsyncClient, *, base_url: str, api_key: str,
                 variant: Literal["v4", "v3"] = "v4", timeout: float = 2.0, calls_at_once: int = 16,
                 data_dir: Path | None = None, task_wait: float = 30.0, task_poll: float = 0.05,
                 filter_attributes: Sequence[str] = ()) -> None:
        dialect = DIALECTS.get(variant)
        if dialect is None:
            raise ValueError(f"zep variant must be 'v4' or 'v3', not {variant!r}")
        self._filter_attributes = _filter_attributes(filter_attributes)
        if not api_key:
            raise ValueError("zep needs an API key (api_key_env)")
        self.variant = variant
        self._dialect = dialect
        self._http = Http(client, base_url=base_url.rstrip("/") + dialect.prefix, key=Secret(api_key),
                          timeout=timeout, idempotency_keys=dialect.idempotency_keys, at_once=calls_at_once)
        self._graphs = Graphs(self._http, dialect, data_dir)
        self._carriers = {kind: dialect.carrier(kind) for kind in KINDS}
        self._ingesting = Ingests(data_dir)
        self._task_wait = task_wait
        self._task_poll = task_poll
        self._capabilities = _capabilities(variant, self._filter_attributes)

    @classmethod
    async def from_config(cls, options: Mapping[str, Any], *, client: httpx.AsyncClient, data_dir: Path,
                          api_key: str | None) -> ZepProvider:
        """Options: `variant` (v4, the default, or v3), `base_url`, `timeout`, `calls_at_once` (HTTP calls
        to Zep at once from this provider: a recall searches each graph on its own), `task_wait` and
        `task_poll` (seconds), `filter_attributes` (at most two attribute keys kept as their own metadata
        keys on episodes so that v4 can filter on them; see docs/adapters.md)."""
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise ValueError(f"unknown zep options: {', '.join(unknown)}")
        variant = options.get("variant", "v4")
        if variant not in DIALECTS:
            raise ValueError("zep option 'variant' must be 'v4' or 'v3'")
        return cls(client, base_url=str(options.get("base_url") or CLOUD_URL), api_key=api_key or "",
                   variant=variant, timeout=float(options.get("timeout", 2.0)),
                   calls_at_once=int(options.get("calls_at_once", 16)), data_dir=data_dir,
                   task_wait=float(options.get("task_wait", 30.0)), task_poll=float(options.get("task_poll", 0.05)),
                   filter_attributes=_option_names(options.get("filter_attributes", ())))

    def __repr__(self) -> str:
        return f"ZepProvider(variant={self.variant!r}, http={self._http!r})"

    def capabilities(self) -> Capabilities:
        return self._capabilities

    async def _graph(self, memory_id: str) -> Graph | None:
        return await self._graphs.find(memory_id)

    async def _vanished(self, memory_id: str, graph: Graph) -> bool:
        return await self._graphs.vanished(memory_id, graph)

    async def _send(self, call: Any, *, absent_ok: bool = False) -> Any:
        return await self._http.send(call, absent_ok=absent_ok)

    async def _settle(self, written: Written | None) -> None:
        await settle(self._http, self._dialect, written.task if written else None,
                     wait=self._task_wait, interval=self._task_poll)

    # ------------------------------------------------------------------ writing one version

    async def _write(self, graph: Graph, version: Record, key: str, *, closing: bool = False) -> Written:
        """Create the object that holds `version`; `closing` makes a fact's edge invalid from creation."""
        try:
            pack = records.pack(version, self._filter_attributes)
        except ValueError as exc:
            raise ProviderRejected(str(exc)) from exc
        kind = records.kind_of(version.type)
        try:
            if kind == "edge":
                at = version.time.written_at
                source, target = await self._ends(graph, version)
                edge = NewEdge(fact=render_text(version), name=_relation(version), source=source,
                               target=target, valid_at=version.time.valid_from,
                               invalid_at=(version.time.valid_to or at) if closing else version.time.valid_to,
                               expired_at=at if closing else None, pack=pack)
                return self._dialect.edges_written(await self._send(self._dialect.add_edges(graph, [edge], key)))[0]
            if kind == "node":
                name = (version.title or render_text(version))[:200]
                summary = "" if closing else render_text(version)
                call = self._dialect.add_node(graph, name, "Entity", summary, pack, key)
                return self._dialect.node_written(await self._send(call))
            data, type_ = ('{"memfed":"forgotten"}', "json") if closing else records.episode_body(version)
            call = self._dialect.add_episode(graph, data, type_, iso(version.time.written_at) or "", pack, key)
            return self._dialect.episode_written(await self._send(call))
        except ValueError as exc:
            raise ProviderUnavailable(f"zep answered a write in a shape memfed cannot read: {exc}") from exc

    async def _ends(self, graph: Graph, fact: Record) -> tuple[dict[str, Any], dict[str, Any]]:
        """A fact's source and target nodes: the current node of its subject and object entities in this
        memory where it names them, else the graph's anchor node."""
        anchor = {"name": ANCHOR_NAME, "labels": [ANCHOR_LABEL]}
        wanted = {r.rel: r.record_id for r in fact.references if r.memory_id == fact.memory_id
                  and r.rel in ("subject", "object")}
        ends: dict[str, dict[str, Any]] = {"subject": dict(anchor), "object": dict(anchor)}
        if wanted:
            loaded = await self._load(fact.memory_id)
            for rel, record_id in wanted.items():
                chain = loaded.get(record_id)
                if chain and chain[-1].kind == "node":
                    ends[rel] = {"uuid": chain[-1].uuid, "name": str(chain[-1].item.get("name", ""))}
        return ends["subject"], ends["object"]

    async def _close(self, graph: Graph, old: records.Version, new: Written, at: datetime,
                     invalid_at: datetime | None, key: str) -> None:
        marker = {records.CLOSED: iso(at), "superseded_by": str(new.item["uuid"])}
        call = self._dialect.close(graph, old.kind, old.item, marker, iso(invalid_at), key)
        if call is not None:
            await self._send(call)

    # ------------------------------------------------------------------ the operations

    async def remember(self, memory_id: str, record: NewRecord) -> Record:
        graph = await self._graphs.ensure(memory_id)
        write_id = record.write_id or records.new_record_id()
        version = Record(
            id=records.record_id_for(write_id), memory_id=memory_id, type=record.type, content=record.content,
            written_by=record.written_by,
            time=RecordTime(written_at=record.written_at, valid_from=record.valid_from, valid_to=record.valid_to),
            title=record.title, attributes=record.attributes, references=record.references,
            write_id=record.write_id,
        )
        try:
            written = await self._write(graph, version, "memfed-" + write_id)
        except NotFound:
            if not await self._graphs.vanished(memory_id, graph):
                raise
            # The graph was deleted at Zep: the memory starts a new one, as on its first write.
            written = await self._write(await self._graphs.ensure(memory_id), version,
                                        "memfed-" + write_id + ":again")
        self._ingestion_started(version.id, written)
        return version

    async def _next(self, memory_id: str, record_id: str, new: Record, write_id: str | None,
                    *, closing: bool, invalid_at: datetime | None) -> Record:
        graph = await self._graphs.ensure(memory_id)
        chain = await self._chain(memory_id, record_id)
        last = chain[-1]
        key = "memfed-" + (write_id or records.new_record_id())
        for older, newer in itertools.pairwise(chain):
            if self._dialect.name == "v4" and records.CLOSED not in _marks(older):
                # A revise whose closing call failed after its new version was written: closed now, so
                # no search shows that version as current.
                closed_by = Written(newer.item)
                await self._close(graph, older, closed_by, newer.record.time.written_at,
                                  newer.record.time.valid_from, f"{key}:repair:{older.record.version}")
        # A revision may change the type, and so the kind of object (an edge cannot become an episode):
        # the new version is an object of its own kind, and history reads the chain from memfed's keys.
        written = await self._write(graph, new, key + ":new", closing=closing)
        try:
            await self._close(graph, last, written, new.time.written_at, invalid_at, key + ":close")
        except NotFound as exc:
            raise RecordNotFound(record_id) from exc  # erased meanwhile
        return new

    async def revise(self, memory_id: str, record_id: str, revision: Revision) -> Record:
        chain = await self._chain(memory_id, record_id)
        if revision.write_id and (done := _written_by(chain, revision.write_id)) is not None:
            return done
        cur = chain[-1].record
        if chain[-1].derived:
            raise Unsupported("a record Zep derived is Zep's to change: state a record of your own instead")
        refuse_following(cur, "revised")
        at = not_before(revision.written_at, cur.time.written_at)
        new = revision_of(cur, memory_id, revision, at)
        return await self._next(memory_id, record_id, new, revision.write_id, closing=False,
                                invalid_at=new.time.valid_from or at)

    async def forget(self, memory_id: str, record_id: str, by: Writer, at: datetime, *,
                     write_id: str | None = None) -> Record:
        chain = await self._chain(memory_id, record_id)
        if write_id and (done := _written_by(chain, write_id)) is not None:
            return done
        cur = chain[-1].record
        if chain[-1].derived:
            raise Unsupported("a record Zep derived is Zep's to change: erase it instead")
        refuse_following(cur, "forgotten")
        if cur.status == "forgotten":
            return cur
        forgotten = tombstone(cur, by=by, at=at, write_id=write_id)
        return await self._next(memory_id, record_id, forgotten, write_id, closing=True,
                                invalid_at=forgotten.time.written_at)

    async def find_write(self, memory_id: str, write_id: str, *, record_id: str | None = None) -> Record | None:
        """The version a write made, read from memfed's keys at Zep (`FindsWrites`)."""
        for chain in (await self._load(memory_id)).values():
            if record_id is not None and chain[0].record.id != record_id:
                continue
            if (found := _written_by(chain, write_id)) is not None:
                return found
        return None

    async def _delete(self, graph: Graph, kind: Kind, uuid: str) -> None:
        key = f"memfed-delete-{uuid}"
        body = await self._send(self._dialect.delete(graph, kind, uuid, key), absent_ok=True)
        if self._dialect.async_deletes and isinstance(body, Mapping):
            from adapters.zep._v4 import task_of

            await self._settle(Written({}, task_of(body)))

    async def erase(self, memory_id: str, record_ids: Sequence[str]) -> Erasure:
        graph = await self._graph(memory_id)
        loaded = await self._load(memory_id) if graph is not None else {}
        erased: list[str] = []
        unreachable: list[str] = []
        remaining: list[str] = []
        reason = "unavailable"
        for record_id in dict.fromkeys(record_ids):
            chain = loaded.get(record_id)
            if not chain or graph is None:
                continue
            try:
                for version in chain:
                    await self._delete(graph, version.kind, version.uuid)
                    if version.kind == "edge":  # the fact_triple episode Zep keeps for a fact added directly
                        for episode in version.item.get("episode_uuids") or ():
                            await self._delete(graph, "episode", str(episode))
            except ProviderError as exc:
                remaining.append(record_id)
                reason = exc.reason
                continue
            erased.append(record_id)
            if _kept_after(loaded, chain):
                unreachable.append(record_id)
        if remaining:
            raise ErasureIncomplete(f"zep did not erase {len(remaining)} of {len(remaining) + len(erased)} records",
                                    erased=tuple(erased), unreachable=tuple(unreachable),
                                    remaining=tuple(remaining), reason=reason)
        return Erasure(tuple(erased), tuple(unreachable))

    async def drop_memory(self, memory_id: str) -> None:
        graph = await self._graph(memory_id)
        if graph is None:
            return
        body = await self._send(self._dialect.delete_graph(graph, "memfed-drop-" + graph.ref), absent_ok=True)
        if self._dialect.async_deletes and isinstance(body, Mapping):
            from adapters.zep._v4 import task_of

            await self._settle(Written({}, task_of(body)))
        self._graphs.forget(memory_id)

    async def close(self) -> None:
        """Nothing to release: the HTTP client belongs to the gateway."""


def _relation(fact: Record) -> str:
    """The edge's name: the fact's `relation` attribute in Zep's upper-snake form, else STATES."""
    raw = fact.attributes.get("relation")
    if isinstance(raw, str) and raw.strip():
        return "".join(c if c.isalnum() else "_" for c in raw.strip().upper())[:64]
    return "STATES"


def _marks(version: records.Version) -> Mapping[str, Any]:
    marks = version.item.get("metadata" if version.kind == "episode" else "attributes")
    return marks if isinstance(marks, Mapping) else {}


def _written_by(chain: Sequence[records.Version], write_id: str) -> Record | None:
    return next((v.record for v in reversed(chain) if v.record.write_id == write_id), None)


def _kept_after(loaded: Mapping[str, Sequence[records.Version]], chain: Sequence[records.Version]) -> bool:
    """Whether Zep still holds something made from the erased versions: a derived record whose episodes
    include one of them (Zep keeps what it derived when an episode is deleted)."""
    uuids = {v.uuid for v in chain}
    return any(
        v.derived and uuids & set(v.item.get("episode_uuids") or ())
        for other in loaded.values() for v in other
    )
