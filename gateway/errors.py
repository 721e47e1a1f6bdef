"""The error envelope of every non-2xx answer: `{"error": {type, code, message, param, detail}}`.

Handlers raise `ApiError`; the app turns it (and any failure it did not expect) into the envelope,
so no input, however malformed, is answered with a bare 500 or a framework's HTML page.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from gateway.answers import JSONAnswer

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
