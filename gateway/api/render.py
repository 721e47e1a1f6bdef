"""Contract values -> wire JSON, for one reader.

Everything a reader may not see is decided here at the last moment: references into memories the
reader cannot read become `{record_id, available: false}`, ancestors stop at the first hidden one,
and child counts count only the children the reader can see.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from adapters.base import Part, Record, Reference, part_to_json
from gateway.api._endpoint import Call
from gateway.base.answers import dumps, joined
from gateway.base.clock import rfc3339_or_none
from gateway.federation.plans import Places
from gateway.state.tree import MemoryNode, Tree
from policies import access


class Reader:
    """Whom an answer is rendered for, and where a reference it may not follow is reported.

    Whether a reference may be followed is the policy's `decide_read`; each refused target is reported
    once per answer, with the verdict's own reason (`reader` below audits it).
    """

    def __init__(self, tree: Tree, principals: frozenset[str], refused: Callable[[access.Verdict], None]) -> None:
        self.tree = tree
        self.principals = principals
        self._refused = refused
        self._reported: set[str] = set()

    def follows(self, memory_id: str) -> bool:
        """May this reader follow a reference into `memory_id`; a refusal is reported the first time."""
        verdict = access.decide_read(self.tree, self.principals, memory_id)
        if not verdict.allowed and memory_id not in self._reported:
            self._reported.add(memory_id)
            self._refused(verdict)
        return verdict.allowed


def reader(call: Call, operation: str, principals: frozenset[str] | None = None) -> Reader:
    """The call's reader (or, given `principals`, the one it reads for): the one place a reference the
    reader may not follow is audited, as `operation` with the policy's reason."""
    def refused(verdict: access.Verdict) -> None:
        call.audit(operation, verdict.memory_id, verdict.privilege, False, verdict.reason)

    shown = call.authenticated().principals if principals is None else principals
    return Reader(call.services.store.tree, shown, refused)


def iso(moment: datetime | None) -> str | None:
    return rfc3339_or_none(moment)


def memory_json(
    tree: Tree, principals: frozenset[str], node: MemoryNode, privileges: frozenset[str],
    record_count: int | None,
) -> dict[str, Any]:
    return {
        "id": node.id,
        "object": "memory",
        "name": node.name,
        "description": node.description,
        "parent_id": access.visible_parent(tree, principals, node.id),
        "ancestors": access.visible_ancestors(tree, principals, node.id),
        "restricted": node.restricted,
        "provider": node.provider,
        "privileges": [p for p in access.PRIVILEGES if p in privileges],
        "records": {"count": record_count},
        "children": {"count": access.readable_child_count(tree, principals, node.id)},
        "createdAt": node.created_at,
        "updatedAt": node.updated_at,
    }


def place_json(node: MemoryNode, record_count: int | None) -> dict[str, Any]:
    """A memory as recall names a place to go next: `parent` and `children`."""
    return {"id": node.id, "name": node.name, "description": node.description,
            "records": {"count": record_count}}


def part_json(part: Part) -> dict[str, Any]:
    return part_to_json(part, nest_extra=False)


def reference_json(ref: Reference, reader: Reader) -> dict[str, Any]:
    if reader.follows(ref.memory_id):
        out: dict[str, Any] = {"memory_id": ref.memory_id, "record_id": ref.record_id, "available": True}
        if ref.rel is not None:
            out["rel"] = ref.rel
        return out
    # Neither the memory nor what the edge means: naming either would say the target exists.
    return {"record_id": ref.record_id, "available": False}


def record_json(record: Record, reader: Reader, memory_id: str | None = None) -> dict[str, Any]:
    writer: dict[str, Any] = {"kind": record.written_by.kind, "id": record.written_by.id}
    if record.written_by.type is not None:
        writer["type"] = record.written_by.type
    if record.written_by.on_behalf_of is not None:
        writer["on_behalf_of"] = record.written_by.on_behalf_of
    if record.written_by.consolidation_id is not None:
        writer["consolidation_id"] = record.written_by.consolidation_id
    out: dict[str, Any] = {
        "id": record.id,
        "object": "memory.record",
        "memory_id": memory_id or record.memory_id,
        "type": record.type,
        "title": record.title,
        "content": [part_json(p) for p in record.content],
        "attributes": dict(record.attributes),
        "version": record.version,
        "status": record.status,
        "supersedes": record.supersedes,
        "time": {
            "valid_from": iso(record.time.valid_from),
            "valid_to": iso(record.time.valid_to),
            "written_at": iso(record.time.written_at),
            "invalidated_at": iso(record.time.invalidated_at),
        },
        "written_by": writer,
        "references": [reference_json(r, reader) for r in record.references],
        "trust": "untrusted",
    }
    if record.follows is not None:
        out["follows"] = {"kind": record.follows.kind, "id": record.follows.id, "name": record.follows.name}
    return out


def written_json(record: Record, reader: Reader, memory_id: str) -> dict[str, Any]:
    """A write's answer: the record to a caller that may read the memory, else an acknowledgement of
    what was written (which record, which version, its status) and nothing of what it says."""
    if access.may_read(reader.tree, reader.principals, memory_id):
        return record_json(record, reader, memory_id)
    return {"object": "memory.record.acknowledgement", "id": record.id, "memory_id": memory_id,
            "version": record.version, "status": record.status}


def unavailable_references(record: Record, tree: Tree, principals: frozenset[str]) -> list[Reference]:
    """The references this reader was shown as unavailable: a revision by it keeps them as they were."""
    return [r for r in record.references if not access.decide_read(tree, principals, r.memory_id).allowed]


def page_json(items: Iterable[dict[str, Any]], next_cursor: str | None) -> dict[str, Any]:
    return {"object": "list", "data": list(items), "next": next_cursor}


def recall_result_json(record: Record, reader: Reader, memory_id: str, score: float | None, why: Iterable[str],
                       extension: dict[str, Any] | None = None) -> dict[str, Any]:
    """One result of a recall answer (§6.3): the record, the memory it was found in, its score and why."""
    place = reader.tree.get(memory_id)
    return {"record": record_json(record, reader, memory_id),
            "memory": {"id": memory_id, "name": place.name if place else None},
            "score": score, "why": list(why), **({"x.memfed": extension} if extension is not None else {})}


def recall_json(results: list[dict[str, Any]], parent: MemoryNode | None, children: Sequence[MemoryNode],
                counts: Mapping[str, int | None], degraded: list[Any], abstain: bool) -> dict[str, Any]:
    """The recall answer (§6.3), whoever found its results (a recall, or a stored query's records): the
    results, the places to go next with their record counts, what was degraded, and whether it abstained."""
    out: dict[str, Any] = {"object": "memory.recall", "results": results,
                           "children": [place_json(c, counts.get(c.id)) for c in children],
                           "degraded": degraded, "abstain": abstain}
    if parent is not None:
        out["parent"] = place_json(parent, counts.get(parent.id))
    return out


def children_counts(places: Places, counts: Mapping[str, int | None]) -> tuple[int | None, ...]:
    """The record count of each of the places' children, in their order (None: not known yet)."""
    return tuple(map(counts.get, places.child_ids))


def recall_rendered(results: list[dict[str, Any]], places: Places, shown: tuple[int | None, ...],
                    counts: Mapping[str, int | None], degraded: list[Any], abstain: bool) -> bytes:
    """`recall_json` of these places as its JSON bytes, byte for byte. The children's part, a thousand
    entries on a flat tree, is kept rendered with the places while their counts (`shown`, from
    `children_counts`) stay the same: rendering it was the largest piece of the answer's own work."""
    kept = places.rendered
    if kept is None or kept[0] != shown:
        kept = places.rendered = (shown, dumps({"children": [place_json(c, n) for c, n in
                                                             zip(places.children, shown, strict=True)]}))
    tail: dict[str, Any] = {"degraded": degraded, "abstain": abstain}
    if places.parent is not None:
        tail["parent"] = place_json(places.parent, counts.get(places.parent.id))
    return joined(dumps({"object": "memory.recall", "results": results}), kept[1], dumps(tail))
