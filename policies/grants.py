"""The words access decisions are made of: the privileges, a grant, and the read side of the tree.

Pure. `policies.access` decides from these and `policies.explain` says why; both re-export them through
`access`, where callers have always imported them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

PRIVILEGES: tuple[str, ...] = ("read", "write", "create", "delete")
NOTHING: frozenset[str] = frozenset()
PRINCIPAL_KINDS = ("member", "group")
# The deepest a memory may sit below its root. A create or a move past it is refused, so every walk up
# the tree ends within MAX_DEPTH steps, and one that does not has met a cycle in the parent links.
MAX_DEPTH = 256


class BrokenTree(Exception):
    """Walking from a memory did not end within MAX_DEPTH steps: the parent links hold a cycle."""

    def __init__(self, memory_id: str) -> None:
        super().__init__(f"walking the tree from {memory_id} does not end: its parent links hold a cycle")
        self.memory_id = memory_id


@dataclass(frozen=True, slots=True)
class Grant:
    """Privileges given to one principal on one memory; `implicit` marks the creator's grant."""

    id: str
    memory_id: str
    principal: str
    privileges: frozenset[str]
    implicit: bool = False


class TreeView(Protocol):
    """The read side of the tree that access decisions need."""

    def exists(self, memory_id: str) -> bool: ...

    def parent_of(self, memory_id: str) -> str | None: ...

    def children_of(self, memory_id: str) -> Sequence[str]: ...

    def is_restricted(self, memory_id: str) -> bool: ...

    def grants_on(self, memory_id: str) -> Sequence[Grant]: ...

    def grants_to(self, principal: str) -> Sequence[Grant]: ...
