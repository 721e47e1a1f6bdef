"""JSON answers, rendered with orjson.

Rendering the answer was the largest single piece of the gateway's own work on a recall (Python's json
module, ~10% of the event loop's time under load); orjson does the same in a fraction of it. The bytes
match Starlette's JSONResponse (compact, UTF-8, no ASCII escaping); what orjson refuses (an integer past
64 bits) falls back to the json module, so an answer is never lost to the renderer.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from starlette.responses import JSONResponse, Response


def dumps(content: Any) -> bytes:
    """`content` as the answer's JSON bytes."""
    try:
        return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def joined(*objects: bytes) -> bytes:
    """JSON objects rendered apart (`dumps` of a dict each) as one object with all their members, in order:
    a part kept rendered from an earlier answer is not rendered again."""
    members = [o[1:-1] for o in objects if o != b"{}"]
    return b"{" + b",".join(members) + b"}"


class JSONAnswer(JSONResponse):
    def render(self, content: Any) -> bytes:
        return dumps(content)


class RenderedAnswer(Response):
    """A JSON answer whose bytes were rendered already (with `dumps` and `joined`)."""

    media_type = "application/json"
