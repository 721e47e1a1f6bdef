"""For each principal, the memories where its grants begin: what entry points are looked for among.

An entry point of a caller is a memory it holds a privileged grant on whose parent it cannot see. Looking
at every grant it holds costs what it holds: an admin who made a million memories holds a million grants,
and all but its roots (and restricted memories) sit right below another of its grants. A memory can be an
entry point only if, for one of the caller's principals, it is a *top*: that principal holds a privileged
grant on it and on its parent none (or it is a root, or restricted). Were the principal holding one on the
parent, the caller would see the parent. So a caller's entry points are found among its principals' tops,
a handful for such an admin, however many grants it holds.

The tops are kept as the tree changes (`Tree` calls the hooks below after each change), as a superset:
every top is held, and a memory held that is no longer one is only a candidate that the entry-point check
(policies/access.py) turns down. What the hooks do follows from what can make a memory a top: a grant on
it, the principal's grant on its parent going, a move, a restrict. A bulk load (`load_grants`) calls no
hook: it marks the tops stale, and `rebuild` finds them again from every grant, in steps.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Protocol

from policies.access import Grant

STEP = 5_000  # grants or memories looked at between two yields of `rebuild`: a few milliseconds


class _Tree(Protocol):
    def parent_of(self, memory_id: str) -> str | None: ...

    def is_restricted(self, memory_id: str) -> bool: ...

    def children_of(self, memory_id: str) -> Sequence[str]: ...

    def grants_on(self, memory_id: str) -> Sequence[Grant]: ...


def _holds(tree: _Tree, principal: str, memory_id: str) -> bool:
    return any(g.principal == principal and g.privileges for g in tree.grants_on(memory_id))


def is_top(tree: _Tree, principal: str, memory_id: str) -> bool:
    if not _holds(tree, principal, memory_id):
        return False
    parent = tree.parent_of(memory_id)
    return parent is None or tree.is_restricted(memory_id) or not _holds(tree, principal, parent)


class GrantTops:
    def __init__(self) -> None:
        self._tops: dict[str, set[str]] = {}
        # Stale while `built` lags `generation`: a load added grants without the hooks.
        self.generation = 0
        self.built = 0

    @property
    def ready(self) -> bool:
        return self.built == self.generation

    def of(self, principal: str) -> Collection[str] | None:
        """The principal's tops (and perhaps a few memories that no longer are), or None while stale."""
        if not self.ready:
            return None
        return self._tops.get(principal, ())

    def invalidate(self) -> None:
        self.generation += 1

    def _add(self, principal: str, memory_id: str) -> None:
        self._tops.setdefault(principal, set()).add(memory_id)

    # -- hooks, called by the tree after each change (also while stale: adding is always safe)

    def granted(self, tree: _Tree, grant: Grant) -> None:
        """A grant was added: its memory may be a top now, and its children no longer are (but a restricted
        one), since the principal holds the parent."""
        if not grant.privileges:
            return
        if is_top(tree, grant.principal, grant.memory_id):
            self._add(grant.principal, grant.memory_id)
        held = self._tops.get(grant.principal)
        if held:
            for child in tree.children_of(grant.memory_id):
                if child in held and not tree.is_restricted(child):
                    held.discard(child)

    def revoked(self, tree: _Tree, grant: Grant) -> None:
        """A grant went: unless the principal holds another on that memory, the memory is no top any more and
        its children it holds grants on are."""
        principal, memory_id = grant.principal, grant.memory_id
        if _holds(tree, principal, memory_id):
            return
        held = self._tops.get(principal)
        if held is not None:
            held.discard(memory_id)
            if not held:
                del self._tops[principal]
        for child in tree.children_of(memory_id):
            if _holds(tree, principal, child):
                self._add(principal, child)

    def reconsidered(self, tree: _Tree, memory_id: str) -> None:
        """The memory moved or was restricted: a top now for each principal holding it and not its parent."""
        for grant in tree.grants_on(memory_id):
            if grant.privileges and is_top(tree, grant.principal, memory_id):
                self._add(grant.principal, memory_id)

    # -- the rebuild after a load

    def rebuild(self, tree: _Tree, holders: Mapping[str, Sequence[Grant]], step: int | None = None) -> Iterator[None]:
        """Find every principal's tops from its grants, yielding after each `step` looked at. Changes made
        between the steps go through the hooks, so what this finds is added to what they keep, never
        replacing it; the tops are ready once a rebuild begun after the last `invalidate` ends."""
        step = step or STEP
        generation = self.generation
        for principal in list(holders):
            grants = tuple(holders.get(principal, ()))  # a copy: the list changes between the steps
            for start in range(0, len(grants), step):
                for grant in grants[start : start + step]:
                    memory_id = grant.memory_id
                    if not grant.privileges:
                        continue
                    parent = tree.parent_of(memory_id)
                    # Asked of the tree as it is now: a grant on the parent revoked later re-adds this
                    # memory through `revoked`; one given later leaves it as an extra candidate.
                    if parent is None or tree.is_restricted(memory_id) or not _holds(tree, principal, parent):
                        self._add(principal, memory_id)
                yield None
        self.built = generation
