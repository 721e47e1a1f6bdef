"""Each caller's entry points into the tree, kept until the tree changes.

They are looked for among the tops of the caller's principals (gateway/state/tops.py): the memories
where its grants begin, a handful for an admin holding a grant on each of a million memories. After a
load those are found again from every grant, once, in steps that let the event loop serve others
(`prepare` starts that as soon as the tree is in). A list is computed once per version of the tree and
principal set, in slices, and shared by the requests that ask meanwhile; each page then bisects the sorted
list. What decides an entry point stays in policies/access.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.state.tree import Tree
from policies import access

EntryKey = tuple[int, int, str]  # (depth, created_at, id): the order of a listing of entry points
SLICE = 1000  # candidates looked at between two yields to the event loop: a few milliseconds
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
        self._rebuilding: asyncio.Task[None] | None = None

    def prepare(self) -> None:
        """Start finding the tops again if a load left them stale, without waiting for a caller to ask."""
        if not self.tree.tops.ready and (self._rebuilding is None or self._rebuilding.done()):
            self._rebuilding = asyncio.create_task(self._rebuild(), name="memfed-grant-tops")

    async def close(self) -> None:
        task, self._rebuilding = self._rebuilding, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _rebuild(self) -> None:
        for _step in self.tree.rebuild_tops():
            await asyncio.sleep(0)

    async def _tops_ready(self) -> None:
        # A reload meanwhile (`Tree.replace_with`) brings stale tops again: rebuilt in turn.
        while not self.tree.tops.ready:
            self.prepare()
            assert self._rebuilding is not None
            await asyncio.shield(self._rebuilding)

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
        await self._tops_ready()
        tree = self.tree
        found: list[EntryKey] = []
        candidates = access.entry_candidates(tree, principals)
        sight, seen_at = access.Sight(tree, principals), tree.version
        while chunk := list(itertools.islice(candidates, SLICE)):
            if tree.version != seen_at:  # what it kept is of the tree before the change
                sight, seen_at = access.Sight(tree, principals), tree.version
            found.extend(_keys(tree, sight, chunk))
            await asyncio.sleep(0)
        found.sort()
        computed = Computed(version, found)
        self._kept[principals] = computed
        self._kept.move_to_end(principals)
        while len(self._kept) > KEPT:
            self._kept.popitem(last=False)
        return computed


def _keys(tree: Tree, sight: access.Sight, candidates: Iterable[str]) -> list[EntryKey]:
    """The keys of the candidates that are entry points. Whether the caller sees a candidate's parent is a
    walk up the tree; `sight` keeps each answer on the way, so siblings and cousins share it (10,000
    candidates below a few hundred branches walk each branch once). A change between two slices starts a
    new `sight`; one after the list is made is what the pages' own check (`still_entry`) covers."""
    out: list[EntryKey] = []
    for memory_id in candidates:
        node = tree.get(memory_id)
        if node is not None and sight.is_entry_point(memory_id):
            out.append((sight.depth(memory_id), node.created_at, memory_id))
    return out


def still_entry(tree: Tree, principals: frozenset[str], memory_id: str) -> bool:
    """Whether a kept entry point still is one (the tree may have changed since the list was made)."""
    if not tree.exists(memory_id) or not any(
            g.principal in principals and g.privileges for g in tree.grants_on(memory_id)):
        return False
    return access.is_entry_point(tree, principals, memory_id)
