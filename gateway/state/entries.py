"""Each caller's entry points into the tree, kept until the tree changes.

Finding them walks every grant the caller holds; for one holding a million (an admin who made every
memory) that is seconds of work. It is done once per version of the tree and principal set, in slices
that let the event loop serve others in between, and shared by the requests that ask meanwhile; each page
then bisects the sorted list. What decides an entry point stays in policies/access.py.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.state.tree import Tree
from policies import access

EntryKey = tuple[int, int, str]  # (depth, created_at, id): the order of a listing of entry points
SLICE = 2000  # candidates looked at between two yields to the event loop: a few milliseconds
KEPT = 128  # principal sets whose entry points are kept


@dataclass(frozen=True)
class Computed:
    version: int  # of the tree when the computing began; a change meanwhile makes the next ask compute again
    keys: list[EntryKey]


class EntryPoints:
    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self._kept: OrderedDict[frozenset[str], Computed] = OrderedDict()
        self._computing: dict[tuple[frozenset[str], int], asyncio.Task[Computed]] = {}

    async def sorted_for(self, principals: frozenset[str]) -> Computed:
        """The caller's entry points in EntryKey order, as of the current version of the tree or a little
        before it when the tree changed while they were computed (a page checks each one it shows again)."""
        version = self.tree.version
        kept = self._kept.get(principals)
        if kept is not None and kept.version == version:
            self._kept.move_to_end(principals)
            return kept
        task = self._computing.get((principals, version))
        if task is None:
            task = asyncio.create_task(self._compute(principals, version), name="memfed-entry-points")
            self._computing[(principals, version)] = task
            task.add_done_callback(lambda _t: self._computing.pop((principals, version), None))
        # Shielded: a caller that goes away does not cancel the work others wait on.
        return await asyncio.shield(task)

    async def _compute(self, principals: frozenset[str], version: int) -> Computed:
        tree = self.tree
        found: list[EntryKey] = []
        candidates = access.entry_candidates(tree, principals)
        parents_seen: dict[str, bool] = {}
        while chunk := list(itertools.islice(candidates, SLICE)):
            found.extend(_keys(tree, principals, chunk, parents_seen))
            await asyncio.sleep(0)
        found.sort()
        computed = Computed(version, found)
        self._kept[principals] = computed
        self._kept.move_to_end(principals)
        while len(self._kept) > KEPT:
            self._kept.popitem(last=False)
        return computed


def _keys(tree: Tree, principals: frozenset[str], candidates: Iterable[str],
          parents_seen: dict[str, bool]) -> list[EntryKey]:
    """The keys of the candidates that are entry points. `access.is_entry_point` asks whether the caller
    sees the candidate's parent, a walk up the tree; siblings share the answer (a caller holding a grant
    on each of 100,000 children walks up once, not 100,000 times), kept in `parents_seen` for one
    computation: the tree may change meanwhile, which the pages' own check (`still_entry`) covers."""
    out: list[EntryKey] = []
    for memory_id in candidates:
        node = tree.get(memory_id)
        if node is None:
            continue
        parent = node.parent_id
        if parent is None:
            entry = True
        else:
            visible = parents_seen.get(parent)
            if visible is None:
                visible = parents_seen[parent] = not access.is_entry_point(tree, principals, memory_id)
            entry = not visible
        if entry:
            out.append((tree.depth_of(memory_id), node.created_at, memory_id))
    return out


def still_entry(tree: Tree, principals: frozenset[str], memory_id: str) -> bool:
    """Whether a kept entry point still is one (the tree may have changed since the list was made)."""
    if not tree.exists(memory_id) or not any(
            g.principal in principals and g.privileges for g in tree.grants_on(memory_id)):
        return False
    return access.is_entry_point(tree, principals, memory_id)
