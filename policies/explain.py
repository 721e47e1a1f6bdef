"""Access decisions with their derivation: which grants give a privilege and where inheritance stops.

Pure. The same walk as `access.effective`, keeping every contributing grant, so an audit entry can say
why a route allowed or refused (UHP Memories §3). `Verdict` is what a route asks for; it derives the
reason only when it is written down.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from policies.grants import MAX_DEPTH, NOTHING, PRIVILEGES, BrokenTree, Grant, TreeView


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
