"""Which memories one question covers, and one ranking out of many providers' rankings (§6).

Pure. `plan` applies the four rules of §6.1 (down never up, each descendant judged on its own,
`depth`, a declared cap); `fuse` merges ranked lists whose scores are not comparable.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from adapters import degraded as entries
from policies.access import TreeView, walk_down

DEFAULT_CAP = 200
RRF_K = 60

Key = TypeVar("Key", bound=Hashable)


@dataclass(frozen=True)
class Plan:
    """The memories to search, nearest first, and what was left out and why."""

    memory_ids: tuple[str, ...]
    skipped: tuple[str, ...]
    capped: tuple[str, ...]
    degraded: tuple[str, ...]


def plan(
    tree: TreeView,
    principals: frozenset[str],
    memory_id: str,
    *,
    depth: int | None = None,
    cap: int = DEFAULT_CAP,
) -> Plan:
    """Readable memories at and below `memory_id`, breadth first, at most `cap` of them.

    A memory without `read` is skipped but its descendants are still judged: a grant inside a branch
    the caller is otherwise cut off from still lets that one memory be searched. Breadth-first order
    means a cap keeps the memories nearest the one asked, which is where the caller is looking.
    """
    covered: list[str] = []
    skipped: list[str] = []
    capped: list[str] = []
    for node, _level, privileges in walk_down(tree, principals, memory_id, depth):
        if "read" not in privileges:
            skipped.append(node)
        elif len(covered) < cap:
            covered.append(node)
        else:
            capped.append(node)
    degraded = (entries.entry("subtree", f"capped_at_{cap}_memories"),) if capped else ()
    return Plan(tuple(covered), tuple(skipped), tuple(capped), degraded)


def fuse(ranked_lists: Sequence[Sequence[Key]], k: int = RRF_K) -> list[tuple[Key, float]]:
    """Reciprocal rank fusion: score(d) = sum over lists of 1 / (k + rank), rank from 1.

    The score is divided by the best a key could get given how the lists overlap: first in as many
    lists as any key appears in. Lists from different providers never share a record, so there the
    best is first in one list; a key first in every list of overlapping rankings scores 1.0. The
    score lies in [0, 1]. Ties are broken by the key itself (its repr for mixed keys) so the same
    inputs always give the same order.
    """
    if not ranked_lists:
        return []
    terms: dict[Key, list[float]] = {}
    for ranking in ranked_lists:
        for rank, key in enumerate(ranking, start=1):
            terms.setdefault(key, []).append(1.0 / (k + rank))
    # math.fsum rounds the exact sum once, so a total does not depend on the order the lists arrived
    # in (keys with the same ranks tie exactly, and the tie goes to the key), and first in every list
    # adds up to exactly `best`, the same sum taken the same way.
    totals = {key: math.fsum(parts) for key, parts in terms.items()}
    if not totals:
        return []
    best = math.fsum([1.0 / (k + 1)] * max(len(parts) for parts in terms.values()))
    ordered = sorted(totals.items(), key=lambda item: (-item[1], repr(item[0])))
    return [(key, min(1.0, score / best)) for key, score in ordered]
