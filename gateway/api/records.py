"""Records (§4, §5): remember, get, list, revise, forget, history, erase, file parts' bytes.

The gateway stamps `written_by` and `written_at` from the authenticated caller and its own clock; a
client's values for them are never read. References are resolved for each reader when read.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.responses import Response

from adapters.base import (
    Erasure,
    ErasureIncomplete,
    FileRef,
    NewRecord,
    Part,
    Provider,
    Record,
    Reference,
    Revision,
    Writer,
)
from gateway.api._calls import handle_for, on_provider, resolve_record_id, with_alias
from gateway.api._endpoint import Call, Endpoint
from gateway.api._writes import erase_on_provider, write_intent, write_record
from gateway.api.guard import require
from gateway.api.models import Erase, GetRecord, ListRecords, PartIn, Remember, Revise
from gateway.api.render import Reader, page_json, reader, record_json, unavailable_references, written_json
from gateway.api.responses import ErasureOut, RecordList, RecordOut, WrittenOut
from gateway.base import limits
from gateway.base.clock import now
from gateway.base.errors import ApiError, file_not_found, invalid, part_not_found, unavailable, unsupported
from gateway.state.tree import MemoryNode

# What a refused reference in a rendered record is audited as (gateway/api/render.py `reader`).
REFERENCE = "records.reference"


def writer_for(call: Call) -> Writer:
    return Writer("member", call.authenticated().member_id, call.authenticated().type)


async def parts_from(call: Call, node: MemoryNode, content: str | list[PartIn] | None) -> tuple[Part, ...]:
    """Request parts -> contract parts; file parts are completed from the file store and checked
    against the media types the memory's provider keeps (never stored without the file)."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (Part("text", text=content),)
    media = handle_for(call.services, node).capabilities().media
    parts = []
    for index, part in enumerate(content):
        extra = {k: v for k, v in (part.model_extra or {}).items()}
        file_ref = None
        if part.type == "file" and part.file is not None:
            stored = await call.services.files.get(part.file.id)
            if stored is None or stored.owner != call.authenticated().principal:
                raise file_not_found(f"content.{index}.file.id")
            if not any(fnmatch.fnmatch(stored.media_type, pattern) for pattern in media):
                raise unsupported(f"The memory's provider does not keep {stored.media_type} files.",
                                  param=f"content.{index}.file")
            file_ref = FileRef(stored.id, stored.filename, stored.media_type, stored.bytes)
        parts.append(Part(part.type, text=part.text, file=file_ref, role=part.role,
                          text_source=part.text_source if part.type == "file" else None, extra=extra))
    return tuple(parts)


def check_references(references: list[Reference]) -> None:
    for rel in ("subject", "object"):
        if sum(1 for r in references if r.rel == rel) > 1:
            raise invalid(f"A record names at most one {rel}; a statement about two is two records.",
                          param="references")


async def remember(call: Call) -> dict[str, Any]:
    body = call.body_as(Remember)
    node = require(call, call.path["memory_id"], "write", "records.remember")
    references = [Reference(r.memory_id, r.record_id, r.rel) for r in body.references or []]
    check_references(references)
    new = NewRecord(
        type=body.type, content=await parts_from(call, node, body.content), written_by=writer_for(call),
        written_at=now(), title=body.title, attributes=body.attributes or {}, references=tuple(references),
        valid_from=body.time.valid_from if body.time else None, valid_to=body.time.valid_to if body.time else None,
        write_id=write_intent(call).write_id,
    )
    record = await call.services.files.naming(
        node.id, new.content, lambda: write_record(call, node, lambda p: p.remember(node.id, new)))
    call.services.written(node.id)
    return render_written(call, record, node)


def render(call: Call, record: Record, node: MemoryNode, shown: Reader | None = None) -> dict[str, Any]:
    """One record for the caller; a listing passes one `shown` so each refused reference is audited once."""
    return record_json(record, shown or reader(call, REFERENCE), node.id)


def render_written(call: Call, record: Record, node: MemoryNode) -> dict[str, Any]:
    """A write's answer: the record only to a caller holding `read` (gateway/api/render.py `written_json`)."""
    return written_json(record, reader(call, REFERENCE), node.id)


async def get_record(call: Call) -> dict[str, Any]:
    query = call.query_as(GetRecord)
    node = require(call, call.path["memory_id"], "read", "records.get")
    record = await with_alias(call.services, node, call.path["record_id"],
                              lambda rid: lambda p: p.get(node.id, rid, query.as_of), read=True)
    return render(call, record, node)


async def list_records(call: Call) -> dict[str, Any]:
    query = call.query_as(ListRecords)
    node = require(call, call.path["memory_id"], "read", "records.list")
    page = await on_provider(
        call.services, node,
        lambda p: p.list(node.id, types=(query.type,) if query.type else (), include=query.include,
                         as_of=query.as_of, cursor=query.cursor, limit=query.limit),
        read=True,
    )
    shown = reader(call, REFERENCE)
    return page_json((render(call, r, node, shown) for r in page.items), page.next)


async def revise(call: Call) -> dict[str, Any]:
    body = call.body_as(Revise)
    given = body.model_fields_set - {"written_by"}
    if not given:
        raise invalid("A revision changes at least one of type, title, content, attributes, references, time.")
    node = require(call, call.path["memory_id"], "write", "records.revise")
    current = await with_alias(call.services, node, call.path["record_id"],
                               lambda rid: lambda p: p.get(node.id, rid), read=True)
    if current.follows is not None:
        raise unsupported(f"This record follows {current.follows.kind} {current.follows.name!r}; change it "
                          "there, not through the memory.")
    if "episode" in (current.type, body.type):  # §4.1: raw experience as it arrived, append-only
        raise invalid("An episode is append-only: it is never revised, and no record is revised into one. "
                      "Remember a new record instead.", param="type")
    references = None
    if "references" in given:
        stated = [Reference(r.memory_id, r.record_id, r.rel) for r in body.references or []]
        kept = unavailable_references(current, call.services.store.tree, call.authenticated().principals)
        references = tuple(stated + [r for r in kept if r not in stated])
        check_references(list(references))
    # PATCH: a field given as null is cleared (those a record may lack), one left out is kept.
    stated_time = body.time.model_fields_set if body.time else set()
    cleared = {"title"} if "title" in given and body.title is None else set()
    cleared |= {f for f in ("valid_from", "valid_to") if f in stated_time and getattr(body.time, f) is None}
    revision = Revision(
        written_by=writer_for(call), written_at=now(), type=body.type,
        title=body.title if "title" in given else None,
        content=await parts_from(call, node, body.content) if "content" in given else None,
        attributes=body.attributes if "attributes" in given else None, references=references,
        valid_from=body.time.valid_from if body.time else None, valid_to=body.time.valid_to if body.time else None,
        clear=frozenset(cleared), write_id=write_intent(call).write_id,
    )
    record = await call.services.files.naming(node.id, revision.content or (), lambda: write_record(
        call, node, lambda p: p.revise(node.id, current.id, revision), record_id=current.id))
    return render_written(call, record, node)


async def forget(call: Call) -> dict[str, Any]:
    node = require(call, call.path["memory_id"], "write", "records.forget")
    current = await with_alias(call.services, node, call.path["record_id"],
                               lambda rid: lambda p: p.get(node.id, rid), read=True)
    if current.follows is not None:
        raise unsupported(f"This record follows {current.follows.kind} {current.follows.name!r}; it leaves "
                          "the memory when it leaves its source.")
    write_id, writer, at = write_intent(call).write_id, writer_for(call), now()
    record = await write_record(call, node, lambda p: p.forget(node.id, current.id, writer, at, write_id=write_id),
                                record_id=current.id)
    call.services.written(node.id)
    return render_written(call, record, node)


async def history(call: Call) -> dict[str, Any]:
    node = require(call, call.path["memory_id"], "read", "records.history")
    versions = await with_alias(call.services, node, call.path["record_id"],
                                lambda rid: lambda p: p.history(node.id, rid), read=True)
    shown = reader(call, REFERENCE)
    return page_json((render(call, r, node, shown) for r in versions), None)


# Records one provider call erases: a provider that erases one record at a time (mem0 OSS takes changes
# one at a time) stays well inside its timeout, and a failure leaves at most this many ids unknown.
ERASE_CHUNK = 10


async def erase(call: Call) -> dict[str, Any]:
    """Erase in chunks, and say exactly what was done even when a chunk fails: the failure's envelope
    carries `erased`, `unreachable` and `remaining` (not known to be erased: erase them again)."""
    body = call.body_as(Erase)
    node = require(call, call.path["memory_id"], "delete", "records.erase")
    services = call.services
    # An id from before the memory moved to another provider erases the record it now names.
    current_ids = [await resolve_record_id(services, node.id, rid) or rid for rid in body.record_ids]
    files_of: dict[str, set[str]] = {}
    for record_id in current_ids:
        try:
            versions = await on_provider(services, node, _history_of(node.id, record_id), read=True)
        except ApiError as error:
            if error.code != "memory_record_not_found" and error.code != "memory_unsupported":
                raise
            versions = []
        files_of[record_id] = {p.file.id for v in versions for p in v.content if p.file is not None}
    asked = dict(zip(current_ids, body.record_ids, strict=True))  # answer in the ids the caller gave
    unique = list(dict.fromkeys(current_ids))
    erased: list[str] = []
    unreachable: list[str] = []
    failure: ApiError | None = None
    for start in range(0, len(unique), ERASE_CHUNK):
        chunk = unique[start : start + ERASE_CHUNK]
        try:
            erasure = await erase_on_provider(call, node, chunk, files_of)
        except ErasureIncomplete as partial:  # the provider answers, for some ids: go on with the rest
            erased += partial.erased
            unreachable += partial.unreachable
            failure = unavailable(node.provider, partial.reason)
            continue
        except ApiError as error:  # nothing of this chunk is known to be done: stop here
            failure = error
            break
        erased += erasure.erased
        unreachable += erasure.unreachable
    services.written(node.id)
    # Bytes go only when no record anywhere names them any more (another memory's record may).
    await services.files.release(node.id, erased, set().union(*(files_of.get(rid, set()) for rid in erased)))
    if failure is not None:
        if not erased and failure.status < 500:
            raise failure  # nothing was done and it was the request's doing: said as it was
        remaining = [asked.get(rid, rid) for rid in unique if rid not in set(erased)]
        failure.message += (f" {len(erased)} of {len(unique)} records were erased; erase the "
                            f"{len(remaining)} remaining again.")
        failure.detail = {**(failure.detail or {}), "erased": [asked.get(rid, rid) for rid in erased],
                          "unreachable": [asked.get(rid, rid) for rid in unreachable], "remaining": remaining}
        raise failure
    return {"object": "memory.erasure", "memory_id": node.id,
            "erased": [asked.get(rid, rid) for rid in erased],
            "unreachable": [asked.get(rid, rid) for rid in unreachable]}


def _erase_of(memory_id: str, record_ids: list[str]) -> Callable[[Provider], Awaitable[Erasure]]:
    def ask(provider: Provider) -> Awaitable[Erasure]:
        return provider.erase(memory_id, record_ids)

    return ask


def _history_of(memory_id: str, record_id: str) -> Callable[[Provider], Awaitable[Sequence[Record]]]:
    def ask(provider: Provider) -> Awaitable[Sequence[Record]]:
        return provider.history(memory_id, record_id)

    return ask


async def content_bytes(call: Call) -> Response:
    node = require(call, call.path["memory_id"], "read", "records.content")
    record = await with_alias(call.services, node, call.path["record_id"],
                              lambda rid: lambda p: p.get(node.id, rid), read=True)
    raw_index = call.path["index"]
    index = limits.ascii_index(raw_index)
    if index is None or not 0 <= index < len(record.content) or record.content[index].file is None:
        raise part_not_found("This record has no file part at that index.")
    part_file = record.content[index].file
    data = await call.services.files.read(part_file.id) if part_file else None
    if data is None or part_file is None:
        raise part_not_found("The bytes of this part are no longer kept.")
    return Response(data, media_type=part_file.media_type,
                    headers={"content-disposition": f'attachment; filename="{part_file.id}"'})


P = "/v1/memories/{memory_id}/records"
ENDPOINTS = [
    Endpoint("POST", P, remember, "remember: write one record as stated.", "records.remember", body=Remember,
             status=201, write=True, response=WrittenOut, tags=("records",)),
    Endpoint("GET", P, list_records, "List the records, paginated.", "records.list", query=ListRecords,
             response=RecordList, tags=("records",)),
    Endpoint("GET", P + "/{record_id}", get_record, "One record.", "records.get", query=GetRecord,
             response=RecordOut, tags=("records",)),
    Endpoint("PATCH", P + "/{record_id}", revise, "revise: write a new version.", "records.revise", body=Revise,
             write=True, response=WrittenOut, tags=("records",)),
    Endpoint("DELETE", P + "/{record_id}", forget, "forget: close the record and keep its trace.",
             "records.forget", write=True, response=WrittenOut, tags=("records",)),
    Endpoint("GET", P + "/{record_id}/history", history, "Every version of a record, oldest first.",
             "records.history", response=RecordList, tags=("records",)),
    Endpoint("GET", P + "/{record_id}/content/{index}", content_bytes, "The bytes of one file part.",
             "records.content", media="*/*", tags=("records",)),
    Endpoint("POST", "/v1/memories/{memory_id}/erase", erase,
             "erase: remove content for good; reports what could not be reached.", "records.erase", body=Erase,
             response=ErasureOut, write=True, tags=("records",)),
]
