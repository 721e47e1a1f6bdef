"""Who may do what on a memory (UHP Memories §3), decided from the tree and its grants alone.

Pure: no I/O, no clock. The gateway hands in a `TreeView` (its in-memory tree) and the caller's
principals (`member:ID` plus one `group:GID` per group); every function here answers from those.

The rule, in one sentence: a principal's effective privileges on a memory are the union of the grants
to any of its principals on that memory and on each ancestor, walking up until (and including) the
first restricted node, whose ancestors' grants do not reach it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
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


@dataclass(frozen=True)
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


# --------------------------------------------------------------------------- explained decisions


@dataclass(frozen=True)
class Contribution:
    """One grant that adds to the caller's privileges, and the node it sits on."""

    grant: Grant

    def describe(self) -> str:
        return _describe(self.grant)


@lru_cache(maxsize=65_536)
def _describe(grant: Grant) -> str:
    # A recall logs a reason for each memory it covers, naming the same few grants many times over.
    origin = "creator's implicit grant" if grant.implicit else f"grant {grant.id}"
    privs = ",".join(p for p in PRIVILEGES if p in grant.privileges)
    return f"{origin} to {grant.principal} on {grant.memory_id} gives {privs}"


@dataclass(frozen=True)
class Decision:
    """Effective privileges with their derivation: which grants count and where inheritance stops."""

    memory_id: str
    privileges: frozenset[str]
    contributions: tuple[Contribution, ...]
    cutoff_at: str | None
    path: tuple[str, ...]

    def allows(self, privilege: str) -> bool:
        return privilege in self.privileges

    def reason(self, privilege: str) -> str:
        """One line that says why `privilege` is allowed or refused here."""
        if privilege in self.privileges:
            givers = [c for c in self.contributions if privilege in c.grant.privileges]
            return "allowed by " + "; ".join(c.describe() for c in givers)
        cut = f"; inheritance cut off at restricted memory {self.cutoff_at}" if self.cutoff_at else ""
        if not self.contributions:
            return f"refused: no grant on {self.memory_id} or the ancestors that reach it{cut}"
        return f"refused: the grants that reach {self.memory_id} do not give {privilege}{cut}"

    def as_dict(self) -> dict[str, object]:
        return {
            "memory_id": self.memory_id,
            "privileges": [p for p in PRIVILEGES if p in self.privileges],
            "cutoff_at": self.cutoff_at,
            "path": list(self.path),
            "grants": [
                {
                    "grant_id": c.grant.id,
                    "memory_id": c.grant.memory_id,
                    "principal": c.grant.principal,
                    "privileges": [p for p in PRIVILEGES if p in c.grant.privileges],
                    "implicit": c.grant.implicit,
                    "via_group": c.grant.principal.startswith("group:"),
                }
                for c in self.contributions
            ],
        }


def explain(tree: TreeView, principals: frozenset[str], memory_id: str) -> Decision:
    """The same walk as `effective`, keeping every contributing grant and the cutoff node."""
    held: set[str] = set()
    contributions: list[Contribution] = []
    path: list[str] = []
    cutoff_at: str | None = None
    node: str | None = memory_id
    while node is not None:
        if len(path) > MAX_DEPTH:
            raise BrokenTree(memory_id)
        path.append(node)
        for grant in tree.grants_on(node):
            if grant.principal in principals:
                held |= grant.privileges
                contributions.append(Contribution(grant))
        if tree.is_restricted(node):
            if tree.parent_of(node) is not None:
                cutoff_at = node
            break
        node = tree.parent_of(node)
    return Decision(memory_id, frozenset(held), tuple(contributions), cutoff_at, tuple(path))


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


def explain_subtree(
    tree: TreeView, principals: frozenset[str], root_id: str, depth: int | None = None
) -> dict[str, Decision]:
    """`explain` for every memory of the subtree at once, each derived from its parent's in one step.

    A recall over a thousand memories logs a reason for each; walking up from each would cost
    O(n · depth), this costs O(n).
    """
    decisions = {root_id: explain(tree, principals, root_id)}
    frontier = [root_id]
    level = 0
    while frontier and (depth is None or level < depth):
        next_frontier: list[str] = []
        for parent_id in frontier:
            parent = decisions[parent_id]
            for child in tree.children_of(parent_id):
                own = tuple(Contribution(g) for g in tree.grants_on(child) if g.principal in principals)
                held: frozenset[str] = frozenset().union(*(c.grant.privileges for c in own)) if own else NOTHING
                if tree.is_restricted(child):
                    decisions[child] = Decision(child, held, own, child, (child,))
                else:
                    decisions[child] = Decision(child, parent.privileges | held, own + parent.contributions,
                                                parent.cutoff_at, (child, *parent.path))
                next_frontier.append(child)
        frontier = next_frontier
        level += 1
        if level > MAX_DEPTH and frontier:
            raise BrokenTree(root_id)
    return decisions


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


def entry_points(tree: TreeView, principals: frozenset[str]) -> list[str]:
    """Where the caller enters the tree: every memory it holds a privilege on whose parent it cannot see.

    Only a node holding a grant of the caller's own can be one: a privilege inherited from above
    would make the parent visible too (a cutoff in between would have stopped that grant). A grant
    that gives no privilege opens nothing, so it makes no entry point either.
    """
    entries = []
    for memory_id in granted(tree, principals):
        parent = tree.parent_of(memory_id)
        if parent is None or not effective(tree, principals, parent):
            entries.append(memory_id)
    return entries


def children_holding(tree: TreeView, principals: frozenset[str], memory_id: str, privilege: str) -> list[str]:
    """Direct children on which the caller holds `privilege` (recall's `children` are those it may read)."""
    parent_privileges = effective(tree, principals, memory_id)
    out = []
    for child in tree.children_of(memory_id):
        held = NOTHING if tree.is_restricted(child) else parent_privileges
        if privilege not in held and privilege not in _own(tree, principals, child):
            continue
        out.append(child)
    return out


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
class Verdict:
    """One privilege on one memory, allowed or refused, with the reason an audit entry records.

    The reason is derived only when asked for: most verdicts allow and are never written down.
    """

    memory_id: str
    privilege: str
    decision: Decision | None  # None: there is no such memory

    @property
    def allowed(self) -> bool:
        return self.decision is not None and self.decision.allows(self.privilege)

    @property
    def visible(self) -> bool:
        """Whether the caller holds anything here: a refusal where it holds nothing answers like a miss."""
        return self.decision is not None and bool(self.decision.privileges)

    @property
    def reason(self) -> str:
        if self.decision is None:
            return "refused: no such memory"
        return self.decision.reason(self.privilege)


def decide(tree: TreeView, principals: frozenset[str], memory_id: str, privilege: str) -> Verdict:
    """May the caller use `privilege` on `memory_id`, and why."""
    if not tree.exists(memory_id):
        return Verdict(memory_id, privilege, None)
    return Verdict(memory_id, privilege, explain(tree, principals, memory_id))


def decide_read(tree: TreeView, principals: frozenset[str], memory_id: str) -> Verdict:
    """May the caller read `memory_id` (a reference's target, a parent, a listed memory), and why."""
    return decide(tree, principals, memory_id, "read")


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
