"""JSON answers render as Starlette's JSONResponse would, and never fail on what orjson refuses."""

from __future__ import annotations

import json

from starlette.responses import JSONResponse

from gateway.base.answers import JSONAnswer, dumps, joined


def test_the_bytes_match_starlettes_rendering() -> None:
    content = {"object": "memory.recall", "results": [{"score": 0.5, "why": ["text"], "name": "Zoë ✓"}],
               "degraded": [], "abstain": False, "parent": None, "n": 3}
    assert JSONAnswer(content).body == JSONResponse(content).body


def test_what_orjson_refuses_still_renders() -> None:
    content = {"big": 2**70, 1: "integer key"}
    assert json.loads(bytes(JSONAnswer(content).body)) == {"big": 2**70, "1": "integer key"}


def test_joined_objects_are_the_one_object_rendered_whole() -> None:
    """Parts rendered apart and joined are the same bytes as the whole rendered at once, in its order."""
    whole = {"object": "memory.recall", "results": [{"n": 2**70}], "children": [], "degraded": ["x"], "abstain": True}
    parts = [dumps({"object": "memory.recall", "results": [{"n": 2**70}]}), dumps({}),
             dumps({"children": []}), dumps({"degraded": ["x"], "abstain": True})]
    assert joined(*parts) == dumps(whole) == JSONAnswer(whole).body
    assert joined(dumps({})) == b"{}"
