"""`POST /v1/files`: upload bytes once, then name them by id in a record's file part."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartParser

from gateway.api._endpoint import Call, Endpoint
from gateway.api.responses import StoredFileOut
from gateway.base import limits
from gateway.base.errors import ApiError, bad_request, file_not_found, file_too_large, invalid, multipart_required

# What a multipart form adds around the file's bytes (boundaries, part headers, a `purpose` field).
FORM_OVERHEAD = 64 * 1024


async def upload(call: Call) -> dict[str, Any]:
    limit = call.services.config.file_max_bytes
    request = call.request

    def too_large() -> ApiError:
        return file_too_large(limit)

    declared = limits.declared_length(request.headers)
    if declared is not None and declared > limit + FORM_OVERHEAD:
        raise too_large()
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise multipart_required()
    # The body is counted as it streams, so an upload without Content-Length stops at the limit: the
    # parser spools what it is given to disk, and it is never given more than the limit.
    stream = limits.bounded(request.stream(), limit + FORM_OVERHEAD, too_large)
    try:
        form = await MultiPartParser(request.headers, stream, max_files=1, max_fields=10,
                                     max_part_size=4096).parse()
    except ApiError:
        raise
    except Exception:  # the multipart parser's errors are the client's malformed body
        raise bad_request("The multipart body could not be read.", code="memfed_invalid_multipart") from None
    try:
        return await _save(call, form, limit, too_large)
    finally:
        await form.close()


async def _save(call: Call, form: FormData, limit: int, too_large: Callable[[], ApiError]) -> dict[str, Any]:
    upload_part = form.get("file")
    if not isinstance(upload_part, UploadFile):
        raise invalid("A `file` part is required.", param="file", code="memfed_invalid_request")
    data = await upload_part.read(limit + 1)
    if len(data) > limit:
        raise too_large()
    purpose = form.get("purpose")
    stored = await call.services.files.save(
        call.authenticated().principal, (upload_part.filename or "file")[:500], upload_part.content_type, data,
        purpose if isinstance(purpose, str) and purpose else "memory",
    )
    return stored.document()


async def get_file(call: Call) -> dict[str, Any]:
    stored = await call.services.files.get(call.path["file_id"])
    if stored is None or stored.owner != call.authenticated().principal:
        raise file_not_found("file_id")
    return stored.document()


ENDPOINTS = [
    Endpoint("POST", "/v1/files", upload, "Upload a file (multipart: file, purpose).", "files.upload",
             status=201, raw_body="multipart/form-data", response=StoredFileOut, tags=("files",)),
    Endpoint("GET", "/v1/files/{file_id}", get_file, "One of your files.", "files.get", response=StoredFileOut,
             tags=("files",)),
]
