"""Whether the parent links of the tree's memories form a tree: no cycle, no chain deeper than MAX_DEPTH.

The check runs at every load, over a million memories. It goes down from the roots, depth first, and
counts what it reaches: a memory on a cycle (or below one) is never reached, and a memory more than
MAX_DEPTH below its root is a chain too deep. Going down holds one iterator per level of depth; going up
from each memory would need a map from memory to depth (a million-entry dict whose resizes hold the
event loop for tens of milliseconds in one step, and tens of megabytes held until the check ends). Only
when something is unreached does the walk up run, to name the memories of the cycle: a broken tree
refuses to start, so its check need not be fast.

A memory whose parent is not a memory counts as a root, as everywhere in the tree. A broken tree is refused
with StateCorrupt, whose message names the memories and the table to mend.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from policies.access import MAX_DEPTH

Broken = tuple[str, list[str]]  # ("cycle", the memories of a cycle) or ("too_deep", [a memory too deep])


class Linked(Protocol):
    @property
    def parent_id(self) -> str | None: ...


class Nodes(Protocol):
    """The memories by id: a dict, or the tree's Shards."""

    def __contains__(self, key: object, /) -> bool: ...
    def __len__(self) -> int: ...
    def __getitem__(self, key: str, /) -> Linked: ...
    def __iter__(self) -> Iterator[str]: ...


def checking(nodes: Nodes, children: Mapping[str | None, Sequence[str]], every: int = 5000) -> Iterator[Broken | None]:
    """Yields None after about each `every` memories looked at (so a caller may let others run), and what
    is broken as soon as it is known; ends without yielding a Broken when the links form a tree."""
    roots: list[Sequence[str]] = [children.get(None, ())]
    since = 0
    for parent in list(children):  # the children of a parent that is no memory are roots too
        since += 1
        if parent is not None and parent not in nodes:
            roots.append(children[parent])
        if since >= every:
            since = 0
            yield None
    # Depth first, one iterator per level: what is held is as deep as the tree, never as wide as a level
    # (a level of 900,000 leaves would be a list growing by copies of megabytes).
    reached = 0
    for top in roots:
        stack: list[Iterator[str]] = [iter(top)]
        while stack:
            memory_id = next(stack[-1], None)
            if memory_id is None:
                stack.pop()
                continue
            reached += 1
            if len(stack) > MAX_DEPTH + 1:  # the memory's depth is len(stack) - 1
                yield "too_deep", [memory_id]
                return
            held = children.get(memory_id)
            if held:
                stack.append(iter(held))
            since += 1
            if since >= every:
                since = 0
                yield None
    if reached < len(nodes):
        yield from _walking_up(nodes, every)


def _walking_up(nodes: Nodes, every: int) -> Iterator[Broken | None]:
    """The cycle (or too deep chain) found by walking up from each memory; each is walked once."""
    depth_of: dict[str | None, int] = {None: -1}
    for count, start in enumerate(list(nodes), start=1):
        if count % every == 0:
            yield None
        walked: list[str] = []
        on_walk: set[str] = set()
        node: str | None = start
        while node is not None and node in nodes and node not in depth_of:
            if node in on_walk:
                yield "cycle", walked[walked.index(node) :]
                return
            walked.append(node)
            on_walk.add(node)
            node = nodes[node].parent_id
        base = depth_of.get(node, -1)  # a parent that is not a memory counts as no parent
        for steps, memory_id in enumerate(reversed(walked), start=1):
            depth_of[memory_id] = base + steps
        if walked and depth_of[walked[0]] > MAX_DEPTH:
            yield "too_deep", [walked[0]]
            return


class Checkable(Protocol):
    def broken_chain(self) -> Broken | None: ...


class StateCorrupt(Exception):
    """The state store's memories are not a tree (a cycle in the parent links): the gateway does not start."""


def refuse_broken(tree: Checkable) -> None:
    """StateCorrupt naming the memories when the tree is not one. A cycle would send every walk up the tree
    round it for good: refusing to serve beats hanging on the first listing."""
    broken = tree.broken_chain()
    if broken is not None:
        raise broken_tree_error(*broken)


def broken_tree_error(kind: str, ids: list[str]) -> StateCorrupt:
    if kind == "cycle":
        shown = " -> ".join([*ids[:8], *(["..."] if len(ids) > 8 else []), ids[0]])
        return StateCorrupt(f"the state store's memories form a cycle of parents ({shown}): set parent_id "
                            "of one of them (table memories) to break it before starting")
    return StateCorrupt(f"the state store's memory {ids[0]} sits deeper than the tree allows: "
                        "shorten its chain of parents (table memories) before starting")
