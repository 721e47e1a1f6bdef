"""The error envelope of every non-2xx answer: `{"error": {type, code, message, param, detail}}`.

Handlers raise `ApiError`; the app turns it (and any failure it did not expect) into the envelope,
so no input, however malformed, is answered with a bare 500 or a framework's HTML page.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from gateway.base.answers import JSONAnswer

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        param: str | None = None,
        detail: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.detail = detail
        self.headers = headers or {}

    def envelope(self) -> dict[str, Any]:
        return {
            "error": {
                "type": _TYPES.get(self.status, "server_error" if self.status >= 500 else "invalid_request_error"),
                "code": self.code,
                "message": self.message,
                "param": self.param,
                "detail": self.detail,
            }
        }

    def response(self) -> JSONResponse:
        return JSONAnswer(self.envelope(), status_code=self.status, headers=self.headers)


def memory_not_found() -> ApiError:
    # One message for "absent" and "not yours": the two must read the same (§13).
    return ApiError(404, "memory_not_found", "No such memory.", param="memory_id")


def memory_forbidden(privilege: str) -> ApiError:
    return ApiError(403, "memory_forbidden", f"This operation needs the {privilege} privilege on the memory.",
                    detail={"privilege": privilege})


def record_not_found() -> ApiError:
    return ApiError(404, "memory_record_not_found", "No such record in this memory.", param="record_id")


def invalid(message: str, param: str | None = None, code: str = "memory_invalid", *, detail: Any = None) -> ApiError:
    return ApiError(422, code, message, param=param, detail=detail)


def bad_request(message: str, param: str | None = None, code: str = "invalid_request", *,
                detail: Any = None) -> ApiError:
    return ApiError(400, code, message, param=param, detail=detail)


def bad_cursor(code: str = "memory_invalid") -> ApiError:
    """Every listing's answer to a cursor it did not hand out (adapters.cursors refused it); `code` is the
    route's own namespace (memfed's extension routes answer `memfed_invalid_request`)."""
    return ApiError(422, code, "The cursor is not one this server gave.", param="cursor")


def unsupported(message: str, param: str | None = None) -> ApiError:
    return ApiError(422, "memory_unsupported", message, param=param)


def unavailable(provider: str, reason: str) -> ApiError:
    return ApiError(503, "memory_unavailable", f"The memory's provider did not answer ({reason}).",
                    detail={"provider": provider, "reason": reason})


def busy(message: str, detail: Any = None) -> ApiError:
    return ApiError(409, "memory_busy", message, detail=detail)


def file_not_found(param: str, message: str = "No such file.") -> ApiError:
    return ApiError(404, "memfed_file_not_found", message, param=param)


def route_not_found() -> ApiError:
    return ApiError(404, "memfed_route_not_found", "No such route.")


def method_not_allowed(message: str, allow: str | None = None) -> ApiError:
    return ApiError(405, "memfed_method_not_allowed", message, headers={"Allow": allow} if allow else None)


def internal_error(message: str = "The server failed; the error is logged.") -> ApiError:
    return ApiError(500, "memfed_internal_error", message)


def admin_only(message: str = "This route is for administrators.", param: str | None = None) -> ApiError:
    return ApiError(403, "memfed_admin_required", message, param=param)


def member_not_found() -> ApiError:
    return ApiError(404, "memfed_member_not_found", "No such member.", param="member_id")


def group_not_found() -> ApiError:
    return ApiError(404, "memfed_group_not_found", "No such group.", param="group_id")


def part_not_found(message: str) -> ApiError:
    return ApiError(404, "memfed_part_not_found", message, param="index")


def cross_origin(message: str) -> ApiError:
    return ApiError(403, "memfed_console_cross_origin", message)


# Every other code the gateway answers with, grouped by the room that raises it. Each is built here so a
# code's status, message and param are written once (issue 11, item 6); a test keeps it so.

# -- the request itself: body, media type, query string, validation --

def json_too_deep(max_depth: int) -> ApiError:
    return ApiError(400, "memfed_json_too_deep", f"JSON is nested more than {max_depth} levels deep.",
                    detail={"max_depth": max_depth})


def body_too_large(max_bytes: int, message: str = "The request body is too large.") -> ApiError:
    return ApiError(413, "memfed_body_too_large", message, detail={"max_bytes": max_bytes})


def file_too_large(max_bytes: int) -> ApiError:
    return ApiError(413, "file_too_large", "The file is larger than this server accepts.",
                    detail={"max_bytes": max_bytes})


def json_required(content_type: str) -> ApiError:
    return ApiError(415, "memfed_json_required", "This route reads a JSON body (Content-Type: "
                    "application/json).", detail={"content_type": content_type})


def ndjson_required(media_type: str, content_type: str) -> ApiError:
    return ApiError(415, "memfed_ndjson_required", f"This route reads NDJSON (Content-Type: {media_type}), "
                    "one memory or grant a line.", detail={"content_type": content_type})


def multipart_required() -> ApiError:
    return ApiError(415, "memfed_multipart_required", "Send the file as multipart/form-data.", param="file")


def media_refused(message: str, code: str = "memfed_invalid_request") -> ApiError:
    return ApiError(415, code, message)


def validation_failed(status: int, code: str, message: str, param: str | None,
                      errors: list[dict[str, str]]) -> ApiError:
    """A body or query the route's model refused; `status` and `code` are the route's own."""
    return ApiError(status, code, message, param=param, detail={"errors": errors})


def http_error(status: int, message: str) -> ApiError:
    """An HTTP failure the framework raised that has no code of its own."""
    return ApiError(status, "memfed_http_error", message)


# -- identity, the console's session, fairness --

def invalid_credentials(message: str, param: str | None = None, *, challenge: bool = True) -> ApiError:
    """`challenge` names the bearer scheme (RFC 6750); the console's sign-in form is not a bearer route."""
    return ApiError(401, "invalid_credentials", message, param=param,
                    headers={"WWW-Authenticate": "Bearer"} if challenge else None)


def console_signed_out() -> ApiError:
    return ApiError(401, "memfed_console_signed_out", "Sign in to the console first.")


def csrf_refused() -> ApiError:
    return ApiError(403, "memfed_csrf_token_invalid",
                    "A change from the console must carry the session's CSRF token in X-CSRF-Token.")


def identity_provider_unavailable() -> ApiError:
    return ApiError(503, "memfed_identity_provider_unavailable",
                    "The identity provider's signing keys cannot be fetched right now.")


def rate_limited(message: str, wait: int, limit: str) -> ApiError:
    return ApiError(429, "memfed_rate_limited", message, detail={"retry_after": wait, "limit": limit},
                    headers={"Retry-After": str(wait)})


# -- Idempotency-Key --

def idempotency_key_invalid() -> ApiError:
    return ApiError(400, "memfed_invalid_idempotency_key", "Idempotency-Key is at most 255 characters.",
                    param="Idempotency-Key")


def idempotency_key_reused() -> ApiError:
    return ApiError(422, "memfed_idempotency_key_reused",
                    "This Idempotency-Key was used with a different request.", param="Idempotency-Key")


def idempotency_key_in_use() -> ApiError:
    return ApiError(409, "memfed_idempotency_key_in_use",
                    "A request with this Idempotency-Key is still running; repeat it later for its answer.",
                    param="Idempotency-Key", headers={"Retry-After": "5"})


# -- the gateway's own state and lifecycle --

def loading() -> ApiError:
    return ApiError(503, "memfed_loading", "The gateway is starting; try again shortly.")


def draining() -> ApiError:
    return ApiError(503, "memfed_draining", "The gateway is stopping; send this to another one.")


def mcp_not_running() -> ApiError:
    return ApiError(503, "memfed_mcp_not_running", "The MCP endpoint is not running in this process.")


def state_unavailable(message: str, detail: Any = None) -> ApiError:
    return ApiError(503, "memfed_state_unavailable", message, detail=detail)


# -- providers: what a memory's provider answered, or did not --

def provider_refused(provider: str, reason: str, message: str) -> ApiError:
    """The provider answered, and said no (502: the fault is upstream, not the caller's)."""
    return ApiError(502, "memory_unavailable", message, detail={"provider": provider, "reason": reason})


def outcome_unknown(provider: str, reason: str, retry_after: int) -> ApiError:
    return ApiError(
        503, "memory_unavailable",
        f"The memory's provider did not say whether the write was made ({reason}). Repeat the request with "
        "the same Idempotency-Key to learn what happened: it is looked for before anything is written again.",
        detail={"provider": provider, "reason": reason, "outcome": "unknown"},
        headers={"Retry-After": str(retry_after)},
    )


def translated(status: int, code: str, message: str, *, param: str | None = None, detail: Any = None,
               headers: dict[str, str] | None = None) -> ApiError:
    """An error another layer already classified (a migration's copy error, a tree import's refusal),
    passed on with its own status and code."""
    return ApiError(status, code, message, param=param, detail=detail, headers=headers)


def memory_gone(message: str, memory_id: str) -> ApiError:
    """`memory_not_found` for a memory named inside a body (not the path), with the id it named."""
    return ApiError(404, "memory_not_found", message, param="memory_id", detail={"memory_id": memory_id})


def memory_changed(message: str, memory_id: str) -> ApiError:
    """`memory_busy` for a memory named inside a body that changed under the request."""
    return ApiError(409, "memory_busy", message, param="memory_id", detail={"memory_id": memory_id})


# -- things that are not there --

def key_not_found() -> ApiError:
    return ApiError(404, "memfed_key_not_found", "No such key for this member.", param="key_id")


def not_a_member() -> ApiError:
    return ApiError(404, "memfed_not_a_member", "The member is not in this group.", param="member_id")


def query_not_found() -> ApiError:
    return ApiError(404, "memfed_query_not_found", "No such named query on this memory.", param="name")


def migration_not_found() -> ApiError:
    return ApiError(404, "memfed_migration_not_found", "No migration of this memory was started on this gateway "
                    "since it started.", param="memory_id")


def grant_not_found() -> ApiError:
    return ApiError(404, "memfed_grant_not_found", "No such grant on this memory.", param="grant_id")


def consolidation_not_found() -> ApiError:
    return ApiError(404, "memfed_consolidation_not_found", "No such consolidation run on this memory.",
                    param="run_id")


def harness_not_found() -> ApiError:
    return ApiError(404, "memfed_harness_not_found", "No such harness.", param="harness_id")


def memories_not_attached() -> ApiError:
    return ApiError(404, "memories_not_attached", "The agent holds no memory: nothing was granted to it.")


def job_not_found() -> ApiError:
    return ApiError(404, "memfed_job_not_found", "No such job on this memory.", param="job_id")


def operation_not_found(name: str) -> ApiError:
    return ApiError(404, "memfed_operation_not_found", f"No type of this memory's provider has an operation "
                    f"named {name!r}.", param="name")


# -- conflicts --

def group_exists() -> ApiError:
    return ApiError(409, "memfed_group_exists", "A group with this name exists.", param="name")


def snapshot_exists() -> ApiError:
    return ApiError(409, "memfed_snapshot_exists", "This memory has a snapshot of that name.", param="name")


def query_conflict() -> ApiError:
    return ApiError(409, "memfed_query_conflict", "The query changed while it was being defined; try again.")


def consolidation_running() -> ApiError:
    return ApiError(409, "memfed_consolidation_running", "The run has not finished; revert it once it has.")


def consolidation_reverted(reverted_by: str) -> ApiError:
    return ApiError(409, "memfed_consolidation_reverted", "This run was reverted already.",
                    detail={"reverted_by": reverted_by})


def consolidation_provider_changed() -> ApiError:
    return ApiError(409, "memfed_consolidation_provider_changed", "The memory moved to another provider "
                    "since this run; its changes are not that provider's to undo.")
