"""A map from string keys kept as many small dicts, so that no single insert resizes a big one.

A dict grows by building its whole table again: at 700,000 entries that one insert takes about 30 ms of
CPU (more on a busy machine), and the tree holds three maps of a million entries (memories, grants by
memory, grants by id), each built during the load on the event loop. Split by the key's hash into
`COUNT` dicts, the largest table ever rebuilt holds a `COUNT`th of the entries (about 1 ms at a million).

A lookup costs the hash (cached in the string) and a list index more than a plain dict: hot paths index
`parts` themselves (`shards.parts[hash(key) & MASK]`) rather than call a method.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

V = TypeVar("V")

COUNT = 64  # a power of two: the part is picked by masking the hash
MASK = COUNT - 1


class Shards(Generic[V]):
    """The map's parts; iteration goes part by part (no insertion order across parts)."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[dict[str, V]] = [{} for _ in range(COUNT)]

    def part(self, key: str) -> dict[str, V]:
        return self.parts[hash(key) & MASK]

    def get(self, key: str) -> V | None:
        return self.parts[hash(key) & MASK].get(key)

    def __getitem__(self, key: str) -> V:
        return self.parts[hash(key) & MASK][key]

    def __setitem__(self, key: str, value: V) -> None:
        self.parts[hash(key) & MASK][key] = value

    def __delitem__(self, key: str) -> None:
        del self.parts[hash(key) & MASK][key]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self.parts[hash(key) & MASK]

    def pop(self, key: str) -> V | None:
        """The value taken out, or None when the key is absent."""
        return self.parts[hash(key) & MASK].pop(key, None)

    def __len__(self) -> int:
        return sum(len(part) for part in self.parts)

    def __iter__(self) -> Iterator[str]:
        for part in self.parts:
            yield from part

    def values(self) -> Iterator[V]:
        for part in self.parts:
            yield from part.values()
