"""Who may do what on a memory (UHP Memories §3), decided from the tree and its grants alone.

Pure: no I/O, no clock. The gateway hands in a `TreeView` (its in-memory tree) and the caller's
principals (`member:ID` plus one `group:GID` per group); every function here answers from those.

The rule, in one sentence: a principal's effective privileges on a memory are the union of the grants
to any of its principals on that memory and on each ancestor, walking up until (and including) the
first restricted node, whose ancestors' grants do not reach it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

# The vocabulary and the explained decisions live in their own modules; callers keep importing them
# from here, the one face of access decisions.
from policies.explain import Contribution as Contribution
from policies.explain import Decision as Decision
from policies.explain import Verdict as Verdict
from policies.explain import decide as decide
from policies.explain import decide_read as decide_read
from policies.explain import explain as explain
from policies.explain import explain_subtree as explain_subtree
from policies.grants import MAX_DEPTH as MAX_DEPTH
from policies.grants import NOTHING as NOTHING
from policies.grants import PRINCIPAL_KINDS as PRINCIPAL_KINDS
from policies.grants import PRIVILEGES as PRIVILEGES
from policies.grants import BrokenTree as BrokenTree
from policies.grants import Grant as Grant
from policies.grants import TreeView as TreeView


def principal_error(principal: str) -> str | None:
    """Why a grant's principal string is refused, or None when it is acceptable.

    `member:ID` and `group:ID` are the chapter's kinds that hold grants; a server's own kinds are
    `x.`-prefixed. `provider` writes records but holds no grants, so it is refused like any other.
    """
    kind, sep, ident = principal.partition(":")
    if not sep or not ident or not kind:
        return "a principal is written <kind>:<id>"
    if kind in PRINCIPAL_KINDS or (kind.startswith("x.") and len(kind) > 2):
        return None
    return f"principal kind {kind!r} cannot hold grants; use member, group or an x.-prefixed kind"


# --------------------------------------------------------------------------- the hot path


def effective(tree: TreeView, principals: frozenset[str], memory_id: str) -> frozenset[str]:
    """The caller's effective privileges on one memory (empty when it may not see it)."""
    held: set[str] = set()
    node: str | None = memory_id
    steps = 0
    while node is not None:
        for grant in tree.grants_on(node):
            if grant.principal in principals:
                held |= grant.privileges
        if tree.is_restricted(node):
            break
        node = tree.parent_of(node)
        steps += 1
        if steps > MAX_DEPTH and node is not None:
            raise BrokenTree(memory_id)
    return frozenset(held)


def can(tree: TreeView, principals: frozenset[str], memory_id: str, privilege: str) -> bool:
    return privilege in effective(tree, principals, memory_id)


def may_read(tree: TreeView, principals: frozenset[str], memory_id: str) -> bool:
    """Whether an answer may show the caller the records of a memory, the one its own write made included.

    Only `read` shows a record. A write answers what the provider made of it (the version a revise or a
    forget wrote repeats what the caller did not state, a type's operation or an observe may change
    records it never saw), so a caller that may write but not read is answered with an acknowledgement.
    """
    return "read" in effective(tree, principals, memory_id)


# --------------------------------------------------------------------------- many memories at once


def walk_down(
    tree: TreeView,
    principals: frozenset[str],
    root_id: str,
    depth: int | None = None,
) -> Iterator[tuple[str, int, frozenset[str]]]:
    """Every memory of the subtree, breadth first, with its distance from root and its privileges.

    Each child's privileges are derived from its parent's in one step (parent's plus its own grants, or
    only its own behind a cutoff), so a subtree of n memories costs O(n), not O(n · depth).
    """
    # The hot loop of recall planning: the tree's methods are bound once, and a child's own grants are
    # looked at only when it has any.
    children_of, grants_on, is_restricted = tree.children_of, tree.grants_on, tree.is_restricted
    frontier: list[tuple[str, frozenset[str]]] = [(root_id, effective(tree, principals, root_id))]
    level = 0
    while frontier:
        next_frontier: list[tuple[str, frozenset[str]]] = []
        append = next_frontier.append
        descend = depth is None or level < depth
        for memory_id, privileges in frontier:
            yield memory_id, level, privileges
            if not descend:
                continue
            for child in children_of(memory_id):
                held = NOTHING if is_restricted(child) else privileges
                grants = grants_on(child)
                if grants:
                    for grant in grants:
                        if grant.principal in principals:
                            held = held | grant.privileges
                append((child, held))
        frontier = next_frontier
        level += 1
        if level > MAX_DEPTH and frontier:
            raise BrokenTree(root_id)


def _own(tree: TreeView, principals: frozenset[str], memory_id: str) -> frozenset[str]:
    held: frozenset[str] = NOTHING
    for grant in tree.grants_on(memory_id):
        if grant.principal in principals:
            held = held | grant.privileges
    return held


def visible_parent(tree: TreeView, principals: frozenset[str], memory_id: str) -> str | None:
    """The memory's `parent_id` as a caller may see it: None for a root and for a parent it cannot see."""
    parent = tree.parent_of(memory_id)
    return parent if parent is not None and effective(tree, principals, parent) else None


def visible_ancestors(tree: TreeView, principals: frozenset[str], memory_id: str) -> list[str]:
    """`ancestors` as a caller may see them: root-most first, stopping below the first hidden one."""
    seen: list[str] = []
    node = tree.parent_of(memory_id)
    while node is not None and effective(tree, principals, node):
        if len(seen) >= MAX_DEPTH:
            raise BrokenTree(memory_id)
        seen.append(node)
        node = tree.parent_of(node)
    seen.reverse()
    return seen


def sees(tree: TreeView, principals: frozenset[str], memory_id: str) -> bool:
    """`bool(effective(...))`, stopping at the first grant that gives anything: a caller holding grants
    all over the tree learns it at the first step up."""
    node: str | None = memory_id
    steps = 0
    while node is not None:
        for grant in tree.grants_on(node):
            if grant.principal in principals and grant.privileges:
                return True
        if tree.is_restricted(node):
            return False
        node = tree.parent_of(node)
        steps += 1
        if steps > MAX_DEPTH and node is not None:
            raise BrokenTree(memory_id)
    return False


def entry_candidates(tree: TreeView, principals: frozenset[str]) -> Iterator[str]:
    """The memories holding a grant of the caller's own that gives a privilege, each once: only those can
    be entry points.

    A tree that keeps each principal's tops (`grant_tops`: the memories it holds a privileged grant on and
    not on their parent, or that are roots or restricted, perhaps with a few that no longer are; None when
    it does not know them now) is asked for those instead of every grant: an entry point is a top of one
    of the caller's principals, since one holding the parent would let the caller see it."""
    tops_of = getattr(tree, "grant_tops", None)
    seen: set[str] = set()
    for principal in sorted(principals):
        tops = tops_of(principal) if tops_of is not None else None
        if tops is None:
            # a copy: a caller may pause between candidates
            memories: Iterable[str] = (g.memory_id for g in tuple(tree.grants_to(principal)) if g.privileges)
        else:
            memories = (m for m in tuple(tops) if _holds(tree, principal, m))
        for memory_id in memories:
            if memory_id not in seen and tree.exists(memory_id):
                seen.add(memory_id)
                yield memory_id


def _holds(tree: TreeView, principal: str, memory_id: str) -> bool:
    return any(g.principal == principal and g.privileges for g in tree.grants_on(memory_id))


def is_entry_point(tree: TreeView, principals: frozenset[str], memory_id: str) -> bool:
    """A candidate whose parent the caller cannot see (or a root)."""
    parent = tree.parent_of(memory_id)
    return parent is None or not sees(tree, principals, parent)


class Sight:
    """`sees`, `is_entry_point` and a memory's depth, asked of many memories of one tree for one caller:
    each memory on a way up is looked at once and its answer kept for those below it (10,000 entry-point
    candidates share a few hundred branches above them). The answers are as of when each was first found:
    for use while the tree does not change."""

    def __init__(self, tree: TreeView, principals: frozenset[str]) -> None:
        self.tree, self.principals = tree, principals
        self._sees: dict[str, bool] = {}
        self._depth: dict[str, int] = {}

    def sees(self, memory_id: str) -> bool:
        known = self._sees.get(memory_id)
        if known is not None:
            return known
        tree, principals, memo = self.tree, self.principals, self._sees
        path: list[str] = []
        node: str | None = memory_id
        found = False
        while node is not None:
            known = memo.get(node)
            if known is not None:
                found = known
                break
            path.append(node)
            if any(g.principal in principals and g.privileges for g in tree.grants_on(node)):
                found = True
                break
            if tree.is_restricted(node):
                break
            node = tree.parent_of(node)
            if len(path) > MAX_DEPTH and node is not None:
                raise BrokenTree(memory_id)
        for below in path:  # none of them holds a grant or cuts off above the one that decided
            memo[below] = found
        return found

    def is_entry_point(self, memory_id: str) -> bool:
        parent = self.tree.parent_of(memory_id)
        return parent is None or not self.sees(parent)

    def depth(self, memory_id: str) -> int:
        memo, parent_of = self._depth, self.tree.parent_of
        path: list[str] = []
        node: str | None = memory_id
        while node is not None and node not in memo:
            if len(path) > MAX_DEPTH:
                raise BrokenTree(memory_id)
            path.append(node)
            node = parent_of(node)
        depth = -1 if node is None else memo[node]
        for above in reversed(path):
            depth += 1
            memo[above] = depth
        return memo[memory_id]


def entry_points(tree: TreeView, principals: frozenset[str]) -> list[str]:
    """Where the caller enters the tree: every memory it holds a privilege on whose parent it cannot see.

    Only a node holding a grant of the caller's own can be one: a privilege inherited from above
    would make the parent visible too (a cutoff in between would have stopped that grant). A grant
    that gives no privilege opens nothing, so it makes no entry point either.
    """
    return [m for m in entry_candidates(tree, principals) if is_entry_point(tree, principals, m)]


def children_holding(tree: TreeView, principals: frozenset[str], memory_id: str, privilege: str) -> list[str]:
    """Direct children on which the caller holds `privilege` (recall's `children` are those it may read)."""
    parent_privileges = effective(tree, principals, memory_id)
    restricted_of = getattr(tree, "restricted_children_of", None)
    if privilege in parent_privileges and restricted_of is not None:
        # Every child that is not restricted inherits the privilege: only the restricted ones (the tree
        # lists them apart) are asked about, not each of a flat tree's thousand children.
        refused = {child for child in restricted_of(memory_id) if privilege not in _own(tree, principals, child)}
        return [child for child in tree.children_of(memory_id) if child not in refused]
    out = []
    for child in tree.children_of(memory_id):
        held = NOTHING if tree.is_restricted(child) else parent_privileges
        if privilege not in held and privilege not in _own(tree, principals, child):
            continue
        out.append(child)
    return out


def readable_child_count(tree: TreeView, principals: frozenset[str], memory_id: str) -> int:
    """`len(readable_children(...))`; when the caller sees the memory and the tree can list its restricted
    children apart (`restricted_children_of`), only those are looked at: the others are all readable."""
    restricted_of = getattr(tree, "restricted_children_of", None)
    if restricted_of is None or not sees(tree, principals, memory_id):
        return len(readable_children(tree, principals, memory_id))
    hidden = sum(1 for child in restricted_of(memory_id) if not _own(tree, principals, child))
    return len(tree.children_of(memory_id)) - hidden


def readable_children(tree: TreeView, principals: frozenset[str], memory_id: str) -> list[str]:
    """Direct children the caller holds any privilege on (a listing never shows the others)."""
    parent_privileges = effective(tree, principals, memory_id)
    visible = []
    for child in tree.children_of(memory_id):
        own = _own(tree, principals, child)
        if own or (parent_privileges and not tree.is_restricted(child)):
            visible.append(child)
    return visible


# --------------------------------------------------------------------------- what a route asks


@dataclass(frozen=True)
class Neighbours:
    """Where a reader may go next from a memory: its parent if it may read it, the children it may read."""

    parent: str | None
    children: tuple[str, ...]


def readable_neighbours(tree: TreeView, principals: frozenset[str], memory_id: str) -> Neighbours:
    """The readable parent (None for a root or one the caller may not read) and the readable children."""
    parent = tree.parent_of(memory_id)
    if parent is not None and "read" not in effective(tree, principals, parent):
        parent = None
    return Neighbours(parent, tuple(children_holding(tree, principals, memory_id, "read")))


def granted(tree: TreeView, principals: frozenset[str]) -> dict[str, frozenset[str]]:
    """Every memory these principals hold a grant giving some privilege on, with the effective privileges
    there, in the order of the principals (sorted) and their grants."""
    found: dict[str, frozenset[str]] = {}
    for principal in sorted(principals):
        for grant in tree.grants_to(principal):
            if grant.privileges and grant.memory_id not in found and tree.exists(grant.memory_id):
                found[grant.memory_id] = effective(tree, principals, grant.memory_id)
    return {memory_id: held for memory_id, held in found.items() if held}
