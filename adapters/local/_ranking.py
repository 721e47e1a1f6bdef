"""How the local provider turns its ranked lists into hits: each version's place in each signal's list,
`query` by meaning merged with the words' list where the model is loaded, and reciprocal rank fusion.

Pure functions over the rows recall's statement returns (adapters/local/_recall_sql.py); no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adapters.base import SIGNALS, Hit, Signal
from adapters.local import _embeddings as embeddings
from adapters.local import _sql as sql

RRF_K = 60


def fuse(places: Mapping[int, Mapping[Signal, int]], lists: int) -> dict[int, float]:
    """Reciprocal rank fusion of per-signal places (1 = best), scaled so that first in every list
    scores 1.0. Adapters do not import policies/, so this small copy lives here."""
    best = lists / (RRF_K + 1)
    return {
        key: sum(1.0 / (RRF_K + p) for p in by_signal.values()) / best for key, by_signal in places.items()
    }


def placed(rows: Sequence[Any]) -> tuple[dict[int, dict[Signal, int]], dict[int, Any]]:
    """Each version's place in each signal's list (seq -> signal -> place), and its row by seq."""
    places: dict[int, dict[Signal, int]] = {}
    versions: dict[int, Any] = {}
    for row in rows:
        places.setdefault(row["seq"], {})[row["signal"]] = row["place"]
        versions[row["seq"]] = row
    return places, versions


def add_meaning(places: dict[int, dict[Signal, int]], versions: dict[int, Any], nearest: Sequence[Any]) -> None:
    """`query` by meaning: the nearest versions' order made one list with the words' (hybrid)."""
    versions.update((row["seq"], row) for row in nearest if row["seq"] not in versions)
    words = {seq: by_signal["query"] for seq, by_signal in places.items() if "query" in by_signal}
    for seq, place in embeddings.hybrid(words, [row["seq"] for row in nearest]).items():
        places.setdefault(seq, {})["query"] = place


def fused_hits(places: Mapping[int, Mapping[Signal, int]], versions: Mapping[int, Any], lists: int, limit: int,
                at: str | None) -> tuple[Hit, ...]:
    """The first `limit` versions by fused score, as hits."""
    scores = fuse(places, lists)
    # Equal scores keep the newest first (then the higher id): sorts are stable, so order by the
    # tie-break first. The same store therefore always answers in the same order.
    ranked = sorted(scores, key=lambda seq: (versions[seq]["written_at"], versions[seq]["record_id"]), reverse=True)
    ranked.sort(key=lambda seq: -scores[seq])
    return tuple(
        Hit(record=sql.record(versions[seq], at), score=scores[seq], why=tuple(s for s in SIGNALS if s in places[seq]))
        for seq in ranked[:limit]
    )
