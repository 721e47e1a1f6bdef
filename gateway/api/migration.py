"""Administrators' routes for moving records: migrate a memory to another provider, export, import.

They are thin over gateway/migration/jobs.py. A migration runs within the request and answers its report;
a failure answers the chapter's error with the report in `detail.migration`, the binding unchanged,
and the same request resumes it. An export streams NDJSON; an import takes NDJSON and validates every
line before it writes anything.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from pydantic import Field
from starlette.responses import StreamingResponse

from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require_admin
from gateway.api.models import Strict
from gateway.api.responses_admin import ImportOut, MigrationOut, MigrationProgressOut
from gateway.base.errors import (
    ApiError,
    body_too_large,
    internal_error,
    invalid,
    memory_not_found,
    migration_not_found,
    translated,
)
from gateway.federation.failures import provider_failure
from gateway.migration import jobs as migration
from gateway.migration import progress
from gateway.migration.export_format import MEDIA_TYPE, dumps

log = logging.getLogger("memfed.api")

MAX_IMPORT_BYTES = 64 * 1024 * 1024
_STATUS = {"memory_not_found": 404, "memory_busy": 409, "memory_invalid": 422, "memory_unsupported": 422,
           "memory_unavailable": 503}


class Migrate(Strict):
    to: str = Field(min_length=1, max_length=100, description="The provider to move the records to.")
    recursive: bool = Field(default=False, description="Move every memory below this one too.")
    purge_source: bool = Field(default=False, description="Drop the records at the old provider once switched.")


def _api_error(error: migration.CopyError) -> ApiError:
    detail = dict(error.detail)
    param = detail.pop("param", None)
    if error.code == "memory_not_found":
        param = "memory_id"
    return translated(error.status or _STATUS.get(error.code, 503), error.code, error.message, param=param,
                      detail=detail or None, headers=error.headers)


def _memory(call: Call, operation: str) -> str:
    require_admin(call, operation)
    memory_id = call.path["memory_id"]
    if call.services.store.tree.get(memory_id) is None:
        raise memory_not_found()
    return memory_id


async def migrate(call: Call) -> dict[str, Any]:
    body = call.body_as(Migrate)
    memory_id = _memory(call, "memories.migrate")
    entry = progress.start(call.services, memory_id, body.to, body.recursive)
    try:
        report = await migration.migrate(call.services, memory_id, body.to, recursive=body.recursive,
                                         purge_source=body.purge_source, progress=progress.reporter(entry))
    except migration.CopyError as error:
        failure = _api_error(error)
        progress.finish(entry, error=failure.envelope()["error"])
        raise failure from None
    except BaseException:
        progress.finish(entry, error=internal_error("The migration stopped.").envelope()["error"])
        raise
    document = report.document()
    progress.finish(entry, report=document)
    return document


async def migrate_progress(call: Call) -> dict[str, Any]:
    memory_id = _memory(call, "memories.migrate_progress")
    entry = progress.read(call.services, memory_id)
    if entry is None:
        raise migration_not_found()
    return entry


async def export(call: Call) -> StreamingResponse:
    memory_id = _memory(call, "memories.export")
    lines = migration.export_memory(call.services, memory_id)
    # The first record is read before the answer starts, so a provider that is down is answered with
    # an error status rather than an empty 200.
    try:
        first = await anext(lines, None)
    except migration.CopyError as error:
        raise _api_error(error) from None
    except Exception as exc:
        raise _provider_error(call, memory_id, exc) from None

    async def stream() -> AsyncIterator[str]:
        if first is None:
            return
        yield dumps(first)
        try:
            async for line in lines:
                yield dumps(line)
        except Exception as exc:
            # The status is sent already. A last line that is not a record says the export is cut
            # short, and an import of this file refuses it rather than take a prefix for the whole.
            log.warning("export of %s cut short: %s", memory_id, exc)
            yield dumps(_provider_error(call, memory_id, exc).envelope())

    return StreamingResponse(stream(), media_type=MEDIA_TYPE,
                             headers={"content-disposition": f'attachment; filename="{memory_id}.ndjson"'})


def _provider_error(call: Call, memory_id: str, exc: Exception) -> ApiError:
    """What an export's provider call raised, as every route answers it (api/_calls.py)."""
    node = call.services.store.tree.get(memory_id)
    if node is None:
        return memory_not_found()
    return provider_failure(node, exc)


async def import_(call: Call) -> dict[str, Any]:
    memory_id = _memory(call, "memories.import")
    raw = bytearray()
    async for chunk in call.request.stream():
        raw += chunk
        if len(raw) > MAX_IMPORT_BYTES:
            raise body_too_large(MAX_IMPORT_BYTES, "The import is too large for one request; split it "
                                 "(importing the same lines again resumes).")
    try:
        report = await migration.import_records(call.services, memory_id, bytes(raw).split(b"\n"))
    except migration.LineError as error:
        raise invalid(str(error), param="line", detail={"line": error.line}) from None
    except migration.CopyError as error:
        raise _api_error(error) from None
    return report.document()


P = "/v1/memories/{memory_id}"
ENDPOINTS = [
    Endpoint("POST", P + "/migrate", migrate,
             "Move every record to another provider, then switch the binding; old record ids keep resolving "
             "(admins).", "memories.migrate", body=Migrate, write=True, response=MigrationOut, tags=("migration",)),
    Endpoint("GET", P + "/migrate", migrate_progress,
             "How far the last migration of this memory started on this gateway has got (admins).",
             "memories.migrate_progress", response=MigrationProgressOut, tags=("migration",)),
    Endpoint("GET", P + "/export", export, "Every record with all its versions, as NDJSON (admins).",
             "memories.export", media=MEDIA_TYPE, tags=("migration",)),
    Endpoint("POST", P + "/import", import_, "Write records from NDJSON, each with all its versions (admins).",
             "memories.import", write=True, raw_body=MEDIA_TYPE, response=ImportOut, tags=("migration",)),
]
