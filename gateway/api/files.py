"""`POST /v1/files`: upload bytes once, then name them by id in a record's file part."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import UploadFile

from gateway.api._endpoint import Call, Endpoint
from gateway.errors import ApiError


async def upload(call: Call) -> dict[str, Any]:
    limit = call.services.config.file_max_bytes
    request = call.request
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit + 64 * 1024:
        raise ApiError(413, "file_too_large", "The file is larger than this server accepts.",
                       detail={"max_bytes": limit})
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise ApiError(415, "memfed_multipart_required", "Send the file as multipart/form-data.", param="file")
    try:
        form = await request.form(max_files=1, max_fields=10)
    except Exception:  # the multipart parser's errors are the client's malformed body
        raise ApiError(400, "memfed_invalid_multipart", "The multipart body could not be read.") from None
    upload_part = form.get("file")
    if not isinstance(upload_part, UploadFile):
        raise ApiError(422, "memfed_invalid_request", "A `file` part is required.", param="file")
    data = await upload_part.read(limit + 1)
    if len(data) > limit:
        raise ApiError(413, "file_too_large", "The file is larger than this server accepts.",
                       detail={"max_bytes": limit})
    purpose = form.get("purpose")
    stored = await call.services.files.save(
        call.principal.principal, (upload_part.filename or "file")[:500], upload_part.content_type, data,
        purpose if isinstance(purpose, str) and purpose else "memory",
    )
    return stored.document()


async def get_file(call: Call) -> dict[str, Any]:
    stored = await call.services.files.get(call.path["file_id"])
    if stored is None or stored.owner != call.principal.principal:
        raise ApiError(404, "memfed_file_not_found", "No such file.", param="file_id")
    return stored.document()


ENDPOINTS = [
    Endpoint("POST", "/v1/files", upload, "Upload a file (multipart: file, purpose).", "files.upload",
             status=201, tags=("files",)),
    Endpoint("GET", "/v1/files/{file_id}", get_file, "One of your files.", "files.get", tags=("files",)),
]
