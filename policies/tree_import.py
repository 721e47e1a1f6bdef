"""The shape of a bulk tree import (POST /v1/imports/tree), decided line by line without I/O.

An import is a stream of memory lines, each naming its parent, and grant lines. A parent is an earlier
line (by its `ref`, a label local to the file, or by its `id`) or a memory that exists already. Because a
line can only hang below an earlier line or an existing memory, and every new id is new, the lines can
never close a cycle; what is left to check is that names resolve, that ids and refs are not given twice,
and that no memory sits deeper than MAX_DEPTH.

Existing parents are the import's *anchors*: the caller must hold `create` there (checked by the gateway
through `policies.access`, as a single create is), and the store re-checks each anchor against the rows
when it writes, since the tree may change between the check of a line and the commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from policies.access import MAX_DEPTH, BrokenTree, TreeView

Problem = Literal["invalid", "not_found"]


class LineProblem(Exception):
    """What is wrong with one line: `kind` "invalid" (a bad value) or "not_found" (a name that resolves to
    nothing the caller may see), and the field it is about."""

    def __init__(self, kind: Problem, message: str, param: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.param = param


@dataclass
class Anchor:
    """An existing memory the import hangs memories below: its depth when checked, and the deepest depth
    an imported memory below it reaches."""

    depth: int
    deepest: int = 0


@dataclass
class ImportShape:
    """What the lines so far have made: each new memory's depth, anchor and provider; refs; anchors."""

    tree: TreeView
    # new memory -> (its depth below its root, the existing memory above it, its provider): one tuple a
    # memory, since an import of a million holds a million of them until it is written
    placed: dict[str, tuple[int, str | None, str]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)  # a line's ref -> its memory id
    anchors: dict[str, Anchor] = field(default_factory=dict)
    roots: int = 0

    def resolve(self, name: str) -> str | None:
        """The memory a line names: an earlier line's ref, then an earlier line's id, then an existing
        memory; None when it is none of them."""
        found = self.refs.get(name)
        if found is not None:
            return found
        if name in self.placed or self.tree.exists(name):
            return name
        return None

    def is_new(self, memory_id: str) -> bool:
        return memory_id in self.placed

    def provider_of(self, memory_id: str) -> str:
        return self.placed[memory_id][2]

    def parent(self, name: str | None) -> str | None:
        """The id of the parent a memory line names (None for a root); LineProblem when it names nothing."""
        if name is None:
            return None
        found = self.resolve(name)
        if found is None:
            raise LineProblem("not_found", f"The parent {name!r} is no earlier line's ref or id and no memory.",
                              "parent")
        return found

    def place(self, memory_id: str, ref: str | None, parent_id: str | None, provider: str) -> bool:
        """Add one memory below `parent_id` (resolved by `parent`); True when that parent is an existing
        memory no earlier line hung below (an anchor to check the caller's privilege on)."""
        if memory_id in self.placed or self.tree.exists(memory_id):
            raise LineProblem("invalid", f"The id {memory_id!r} is taken by an earlier line or a memory.", "id")
        if ref is not None and self.resolve(ref) is not None:
            raise LineProblem("invalid", f"The ref {ref!r} is given twice or is a memory's id.", "ref")
        fresh_anchor = False
        anchor: str | None
        if parent_id is None:
            depth, anchor = 0, None
            self.roots += 1
        elif parent_id in self.placed:
            above, anchor, _ = self.placed[parent_id]
            depth = above + 1
        else:
            anchor = parent_id
            if parent_id not in self.anchors:
                self.anchors[parent_id] = Anchor(_depth_of(self.tree, parent_id))
                fresh_anchor = True
            depth = self.anchors[parent_id].depth + 1
        if depth > MAX_DEPTH:
            raise LineProblem("invalid", f"A memory may sit at most {MAX_DEPTH} levels below its root.", "parent")
        if anchor is not None:
            held = self.anchors[anchor]
            held.deepest = max(held.deepest, depth)
        self.placed[memory_id] = (depth, anchor, provider)
        if ref is not None:
            self.refs[ref] = memory_id
        return fresh_anchor

    def grant_target(self, memory: str) -> tuple[str, bool]:
        """The memory a grant line names, and whether it existed before the import."""
        found = self.resolve(memory)
        if found is None:
            raise LineProblem("not_found", f"The memory {memory!r} is no earlier line's ref or id and no memory.",
                              "memory")
        return found, found not in self.placed

    def levels_below(self) -> dict[str, int]:
        """How many levels the import adds below each anchor (1: children only)."""
        return {anchor: held.deepest - held.depth for anchor, held in self.anchors.items()}


def _depth_of(tree: TreeView, memory_id: str) -> int:
    depth, node = 0, tree.parent_of(memory_id)
    while node is not None:
        depth += 1
        if depth > MAX_DEPTH:
            raise BrokenTree(memory_id)
        node = tree.parent_of(node)
    return depth
