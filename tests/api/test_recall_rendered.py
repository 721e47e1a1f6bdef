"""A recall's answer rendered with its children kept rendered (gateway/api/render.py `recall_rendered`) is
the answer `recall_json` renders, byte for byte, and never shows a count other than the one looked up."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.api.render import children_counts, recall_json, recall_rendered
from gateway.base.answers import dumps
from gateway.federation.plans import Places
from gateway.state.tree import MemoryNode


def _node(n: int, parent: str | None = "mem_root") -> MemoryNode:
    return MemoryNode(f"mem_{n}", f"m{n} ✓", "about \"it\"", parent, False, f"vendor{n % 3}", "mbr_a", n, n)


def _places(parent: MemoryNode | None, children: list[MemoryNode]) -> Places:
    return Places(parent, tuple(children), (*((parent,) if parent else ()), *children), tuple(c.id for c in children))


RESULTS: list[dict[str, Any]] = [{"record": {"id": "rec_1", "attributes": {"big": 2**70}}, "score": 0.5}]


def test_the_bytes_are_recall_jsons() -> None:
    parent, children = _node(0, None), [_node(n) for n in range(1, 6)]
    for shown_parent in (parent, None):
        places = _places(shown_parent, children)
        counts: dict[str, int | None] = {"mem_0": 7, "mem_1": 1, "mem_3": 0}
        shown = children_counts(places, counts)
        assert shown == (1, None, 0, None, None)
        rendered = recall_rendered(RESULTS, places, shown, counts, ["children:counts_pending"], False)
        assert rendered == dumps(recall_json(RESULTS, shown_parent, children, counts, ["children:counts_pending"],
                                             False))


def test_a_count_that_changed_is_rendered_again() -> None:
    children = [_node(n) for n in range(1, 4)]
    places = _places(None, children)

    def shown_counts(counts: dict[str, int | None]) -> list[int | None]:
        rendered = recall_rendered([], places, children_counts(places, counts), counts, [], True)
        return [c["records"]["count"] for c in orjson.loads(rendered)["children"]]

    assert shown_counts({}) == [None, None, None]
    kept = places.rendered
    assert shown_counts({}) == [None, None, None]
    assert places.rendered is kept  # the same counts: the children's part is not rendered again
    assert shown_counts({"mem_2": 4}) == [None, 4, None]
    assert shown_counts({"mem_2": 5, "mem_3": 0}) == [None, 5, 0]
    assert shown_counts({}) == [None, None, None]
