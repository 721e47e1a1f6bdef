"""The bounds every request is held to before any work is done on it, in one place.

- A JSON body is at most `MAX_JSON_BYTES`, counted while it streams (a chunked body has no length to trust).
- JSON is nested at most `MAX_JSON_DEPTH` levels (an array or object is a level), checked as it is
  parsed, so no validator, renderer or encoder ever recurses deep enough to fail.
- `attributes` are nested at most `ATTRIBUTES_MAX_DEPTH` levels and at most `ATTRIBUTES_MAX_BYTES` as
  compact JSON: a record's attributes travel to every vendor and into every read tool.
- Every string is Unicode text (no lone surrogate such as "\\ud800", which no vendor, database or encoder
  can store) and every integer fits a signed 64-bit one (what databases and vendors compare).
- Every datetime names an instant that exists in UTC (year 1 to 9999 once its offset is applied).

`docs/limits.md` says the same for clients.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema

from gateway.base import errors
from gateway.base.errors import ApiError

MAX_JSON_BYTES = 2 * 1024 * 1024
MAX_JSON_DEPTH = 64
ATTRIBUTES_MAX_DEPTH = 16
ATTRIBUTES_MAX_BYTES = 64 * 1024
INT_MIN, INT_MAX = -(2**63), 2**63 - 1

def too_deep() -> ApiError:
    return errors.json_too_deep(MAX_JSON_DEPTH)


def depth(value: Any) -> int:
    """How deep a parsed JSON value nests (a scalar is 0, `[]` is 1), walked without recursion; only
    containers are visited, so a wide value costs one pass of C-speed filtering per container."""
    deepest = 0
    stack: list[tuple[int, Any]] = [(0, value)]
    while stack:
        level, item = stack.pop()
        inner = item.values() if type(item) is dict else item if type(item) is list else None
        if inner is None:
            continue
        deepest = max(deepest, level + 1)
        stack.extend([(level + 1, x) for x in inner if type(x) is dict or type(x) is list])
    return deepest


# Only these can hide a lone surrogate or a too-large integer in JSON text: an escape of a surrogate
# (raw bytes that encode one are not UTF-8, and the parser refuses them) or a run of 19 or more digits.
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_MAYBE_HUGE = re.compile(rb"[0-9]{19}")


def loads(raw: bytes | str) -> Any:
    """JSON text -> value, refusing (ApiError 400) text nested past the limit. ValueError for non-JSON.

    The C parser stops itself with RecursionError near the interpreter's limit, unwinding cleanly; what
    it parses is then measured without recursion, so nothing after it (validation, rendering, a vendor's
    encoder) ever meets more than MAX_JSON_DEPTH levels."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise too_deep() from None
    text = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if (text.count(b"[") + text.count(b"{") > MAX_JSON_DEPTH) and depth(value) > MAX_JSON_DEPTH:
        raise too_deep()
    return value


def plain_problem(value: Any, raw: bytes | None = None) -> tuple[str, str] | None:
    """(where, what is wrong) for the first string that is not Unicode text or integer past 64 bits in a
    parsed JSON value, or None. Given the text it came from, a text that cannot hold either is not walked."""
    if raw is not None and not _MAYBE_SURROGATE.search(raw) and not _MAYBE_HUGE.search(raw):
        return None
    stack: list[tuple[Any, Any]] = [(None, value)]  # (path as nested (parent, key) pairs, value)
    while stack:
        path, item = stack.pop()
        kind = type(item)
        if kind is str:
            if not item.isascii() and _has_surrogate(item):
                return _where(path), "is not valid Unicode text (a lone surrogate)"
        elif kind is int:
            if not INT_MIN <= item <= INT_MAX:
                return _where(path), "is an integer outside the signed 64-bit range"
        elif kind is dict:
            for key, inner in item.items():
                if not key.isascii() and _has_surrogate(key):
                    return _where(path), "has a key that is not valid Unicode text (a lone surrogate)"
                stack.append(((path, key), inner))
        elif kind is list:
            stack.extend(((path, n), inner) for n, inner in enumerate(item))
    return None


def _where(path: Any) -> str:
    keys: list[str] = []
    while path is not None:
        path, key = path
        keys.append(str(key))
    return ".".join(reversed(keys))


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


async def bounded(chunks: AsyncIterator[bytes], max_bytes: int, refuse: Callable[[], ApiError]
                  ) -> AsyncGenerator[bytes, None]:
    """The chunks of a body, stopping with `refuse()` as soon as more than `max_bytes` have come."""
    taken = 0
    async for chunk in chunks:
        taken += len(chunk)
        if taken > max_bytes:
            raise refuse()
        yield chunk


def body_too_large(max_bytes: int = MAX_JSON_BYTES) -> ApiError:
    return errors.body_too_large(max_bytes)


def declared_length(headers: Any) -> int | None:
    given = headers.get("content-length")
    return int(given) if given and given.isascii() and given.isdigit() else None


# ---------------------------------------------------------------- value types for the wire models


def _attributes(value: dict[str, Any]) -> dict[str, Any]:
    if depth(value) > ATTRIBUTES_MAX_DEPTH:
        raise ValueError(f"attributes are nested at most {ATTRIBUTES_MAX_DEPTH} levels deep")
    if len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")) \
            > ATTRIBUTES_MAX_BYTES:
        raise ValueError(f"attributes are at most {ATTRIBUTES_MAX_BYTES} bytes as JSON")
    return value


Attributes = Annotated[dict[str, Any], AfterValidator(_attributes),
                       Field(description=f"Free-form JSON object: at most {ATTRIBUTES_MAX_DEPTH} levels deep "
                                         f"and {ATTRIBUTES_MAX_BYTES} bytes as compact JSON.")]


def instant(moment: datetime) -> datetime:
    """A datetime that names a real instant: its UTC form exists (a naive one is read as UTC)."""
    if moment.tzinfo is None:
        return moment
    try:
        moment.astimezone(UTC)
    except OverflowError:
        raise ValueError("the time is outside years 1 to 9999 once converted to UTC") from None
    return moment


def _rfc3339(value: Any) -> Any:
    """Only text names a time on the wire (a number, seconds since 1970 to pydantic, is refused), read
    here, so that strict validation of a JSON body and lax reading of a query string agree."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not (len(value) >= 10 and value[:4].isdigit() and value[4] == "-"):
        raise ValueError("a time is an RFC 3339 date-time string")
    try:
        return datetime.fromisoformat(value[:-1] + "+00:00" if value[-1:] in "Zz" else value)
    except ValueError:
        raise ValueError("a time is an RFC 3339 date-time string") from None


Instant = Annotated[datetime, BeforeValidator(_rfc3339), AfterValidator(instant),
                    WithJsonSchema({"type": "string", "format": "date-time"})]


def ascii_index(text: str) -> int | None:
    """A path segment as a non-negative integer when it is ASCII digits only: a superscript two or an
    Arabic-Indic one is a digit to str.isdigit, and int() reads the second as 1."""
    if text.isascii() and text.isdigit() and len(text) <= 18:
        return int(text)
    return None
