"""JSON answers render as Starlette's JSONResponse would, and never fail on what orjson refuses."""

from __future__ import annotations

import json

from starlette.responses import JSONResponse

from gateway.base.answers import JSONAnswer


def test_the_bytes_match_starlettes_rendering() -> None:
    content = {"object": "memory.recall", "results": [{"score": 0.5, "why": ["text"], "name": "Zoë ✓"}],
               "degraded": [], "abstain": False, "parent": None, "n": 3}
    assert JSONAnswer(content).body == JSONResponse(content).body


def test_what_orjson_refuses_still_renders() -> None:
    content = {"big": 2**70, 1: "integer key"}
    assert json.loads(bytes(JSONAnswer(content).body)) == {"big": 2**70, "1": "integer key"}
