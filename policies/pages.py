"""Listing pages that resume where the previous page stopped, whatever the size of what is listed.

A page of `?parent=` or `?ancestor=` is a stretch of one walk: the siblings under a memory in key order
(created_at, id), and for a subtree a depth-first walk taking siblings in that order. The cursor holds the
key of the last memory walked (and, for a subtree, of the memories above it), so the next page bisects
to that place instead of walking again from the start. Each page walks at most `budget` memories: a caller
that sees few of many may get a short page with a cursor, never a page that holds the event loop.

Which memories show is decided exactly as in `access` (`readable_children`, `walk_down`): only the order
and where a page starts are new here. Pure, like access.py.

Across pages a memory present throughout is listed exactly once, whatever is created or deleted in
between: a new memory sorts after its siblings (it is the newest), and a deleted one leaves its key behind
in the cursor, which still says where its siblings resume. A memory moved between pages may be missed or
listed twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from policies.access import MAX_DEPTH, NOTHING, BrokenTree, TreeView, effective

SortKey = tuple[int, str]
BUDGET = 5000  # memories walked at most per page: a few milliseconds


class OrderedTree(TreeView, Protocol):
    """A TreeView whose siblings come in SortKey order."""

    def sort_key(self, memory_id: str) -> SortKey | None: ...

    def index_after(self, parent_id: str | None, key: SortKey) -> int: ...


class CursorGone(Exception):
    """The cursor's place in the tree is gone (memories above it deleted or moved, deeper than it recorded)."""


@dataclass(frozen=True)
class Page:
    ids: list[str]
    resume: list[SortKey] | None  # None: nothing more; else the keys from below the listed memory down


def _own(tree: TreeView, principals: frozenset[str], memory_id: str, inherited: frozenset[str]) -> frozenset[str]:
    held = inherited
    for grant in tree.grants_on(memory_id):
        if grant.principal in principals:
            held = held | grant.privileges
    return held


def children_page(tree: OrderedTree, principals: frozenset[str], parent_id: str, after: SortKey | None,
                  limit: int, budget: int = BUDGET) -> Page:
    """The readable children of `parent_id` that sort after `after`, at most `limit` of them."""
    parent_privileges = effective(tree, principals, parent_id)
    children = tree.children_of(parent_id)
    start = 0 if after is None else tree.index_after(parent_id, after)
    out: list[str] = []
    last: str | None = None
    for index in range(start, min(len(children), start + budget)):
        child = children[index]
        inherited = NOTHING if tree.is_restricted(child) else parent_privileges
        if _own(tree, principals, child, inherited):
            if len(out) == limit:
                return Page(out, _keys(tree, [last]) if last else None)
            out.append(child)
        last = child
    if start + budget < len(children) and last is not None:
        return Page(out, _keys(tree, [last]))  # the budget ran out: the rest on the next page
    return Page(out, None)


def descendants_page(tree: OrderedTree, principals: frozenset[str], root_id: str, after: Sequence[SortKey],
                     limit: int, *, complete: bool = True, budget: int = BUDGET) -> Page:
    """The readable memories below `root_id` in depth-first order, after the place `after` names (the keys
    down to the last memory walked: from a child of `root_id` when `complete`, else only the deepest part
    of that path), at most `limit` of them. CursorGone when that place cannot be found again."""
    frames = _resume(tree, principals, root_id, after, complete)
    out: list[str] = []
    emitted: list[str] | None = None  # the walk's path when the last listed memory was listed
    for walked, (memory_id, privileges) in enumerate(_walk(tree, principals, frames, root_id), start=1):
        if privileges:
            if len(out) == limit:
                return Page(out, _keys(tree, emitted or []))
            out.append(memory_id)
            emitted = [frame.node for frame in frames[1:]]
        if walked >= budget:
            return Page(out, _keys(tree, [frame.node for frame in frames[1:]]))
    return Page(out, None)


def _keys(tree: OrderedTree, path: Sequence[str]) -> list[SortKey]:
    keys = [tree.sort_key(m) for m in path]
    return [k for k in keys if k is not None]


class _Frame:
    """Where the walk stands at one level: the memory, its privileges, the index of its next child."""

    __slots__ = ("index", "node", "privileges")

    def __init__(self, node: str, privileges: frozenset[str], index: int) -> None:
        self.node, self.privileges, self.index = node, privileges, index


def _walk(tree: TreeView, principals: frozenset[str], frames: list[_Frame], root_id: str
          ) -> Iterator[tuple[str, frozenset[str]]]:
    """Depth first from `frames` (the path from the root to where the walk stands, each with the next child
    to take); each child's privileges come from its parent's in one step, as in `walk_down`."""
    children_of, is_restricted = tree.children_of, tree.is_restricted
    while frames:
        frame = frames[-1]
        children = children_of(frame.node)
        if frame.index >= len(children):
            frames.pop()
            continue
        child = children[frame.index]
        frame.index += 1
        held = _own(tree, principals, child, NOTHING if is_restricted(child) else frame.privileges)
        if len(frames) > MAX_DEPTH:
            raise BrokenTree(root_id)
        frames.append(_Frame(child, held, 0))
        yield child, held


def _resume(tree: OrderedTree, principals: frozenset[str], root_id: str, after: Sequence[SortKey],
            complete: bool) -> list[_Frame]:
    """The walk's frames at the place `after` names: below the deepest memory of it still in place."""
    found = _still_in_place(tree, root_id, after)
    next_key: SortKey | None
    if found is not None:
        chain, kept = found
        next_key = after[kept] if kept < len(after) else None
    elif not after:
        chain, next_key = [root_id], None
    elif complete:  # every memory it named went: resume among the root's children, after the first
        chain, next_key = [root_id], after[0]
    else:
        raise CursorGone(after[0][1])
    frames: list[_Frame] = []
    privileges = effective(tree, principals, chain[0])
    for depth, node in enumerate(chain):
        if depth:
            privileges = _own(tree, principals, node, NOTHING if tree.is_restricted(node) else privileges)
        below = chain[depth + 1] if depth + 1 < len(chain) else None
        if below is not None:
            key = tree.sort_key(below)
            index = tree.index_after(node, key) if key is not None else 0
            # the frame below is walked next, then this one carries on after it
        else:
            index = tree.index_after(node, next_key) if next_key is not None else 0
        frames.append(_Frame(node, privileges, index))
    return frames


def _still_in_place(tree: OrderedTree, root_id: str, after: Sequence[SortKey]) -> tuple[list[str], int] | None:
    """(the path from the root down to the deepest memory of `after` still below the root where the cursor
    saw it, how many of `after` that covers), or None when none is."""
    for kept in range(len(after), 0, -1):
        memory_id = after[kept - 1][1]
        if tree.sort_key(memory_id) != after[kept - 1]:
            continue
        if kept >= 2 and tree.parent_of(memory_id) != after[kept - 2][1]:
            continue  # moved since: not where the cursor saw it
        path = [memory_id]
        node = tree.parent_of(memory_id)
        while node is not None and node != root_id:
            if len(path) > MAX_DEPTH:
                raise BrokenTree(memory_id)
            path.append(node)
            node = tree.parent_of(node)
        if node != root_id:
            continue
        path.append(root_id)
        path.reverse()
        return path, kept
    return None
