"""Explanations as a caller who does not see the whole tree may read them.

Why X holds what it holds on a memory is a walk up from the memory, and the grants that count may sit
on ancestors the asking caller cannot see. Such a caller (a holder of `delete` on the memory, reading
`GET .../access` or its subtree's decision log) is told the derivation as far up as it reaches: the run
of nodes from the memory upwards that it can see, the grants on them, and for anything higher only that
it is "inherited from above your reach". Neither the ids of hidden nodes, nor the principals, grant ids
or privileges of grants on them, nor a restricted memory up there, are named.

Pure, like policies/access.py: `visible` says whether the caller may see a memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from policies import access
from policies.access import Contribution, Decision, Grant, TreeView

ABOVE_REACH = "inherited from above your reach"
Visible = Callable[[str], bool]


@dataclass(frozen=True)
class WithinReach:
    """A `Decision` cut at the caller's reach."""

    memory_id: str
    privileges: frozenset[str]  # all of them: what the principal holds is what is asked
    contributions: tuple[Contribution, ...]  # only the grants on nodes the caller sees
    path: tuple[str, ...]  # from the memory up, stopping below the first node the caller cannot see
    cutoff_at: str | None  # only a cutoff inside the path
    from_above: frozenset[str]  # the privileges that grants above the caller's reach give

    def reason(self, privilege: str) -> str:
        if privilege in self.privileges:
            givers = [c.describe() for c in self.contributions if privilege in c.grant.privileges]
            return _allowed(givers, privilege in self.from_above)
        # Decision.reason's words, with the cutoff named only when the caller sees it.
        cut = f"{_CUT}{self.cutoff_at}" if self.cutoff_at else ""
        if not self.privileges:
            return f"refused: no grant on {self.memory_id} or the ancestors that reach it{cut}"
        return f"refused: the grants that reach {self.memory_id} do not give {privilege}{cut}"


def within_reach(decision: Decision, visible: Visible) -> WithinReach:
    path: list[str] = []
    for node in decision.path:
        if not visible(node):
            break
        path.append(node)
    seen = set(path)
    contributions = tuple(c for c in decision.contributions if c.grant.memory_id in seen)
    above = frozenset().union(*(c.grant.privileges for c in decision.contributions if c.grant.memory_id not in seen))
    return WithinReach(decision.memory_id, decision.privileges, contributions, tuple(path),
                       decision.cutoff_at if decision.cutoff_at in seen else None, above)


def _allowed(givers: list[str], from_above: bool) -> str:
    if not givers:
        return f"allowed: {ABOVE_REACH}"
    return _ALLOWED + "; ".join(givers) + (f"; also {ABOVE_REACH}" if from_above else "")


# --------------------------------------------------------------------------- reasons already written down

# The shapes `Decision.reason` writes (policies/access.py): "allowed by " and clauses joined by "; ", each
# "<creator's implicit grant | grant ID> to PRINCIPAL on MEMORY gives PRIVS"; or a refusal that may end
# with "; inheritance cut off at restricted memory MEMORY".
_ALLOWED = "allowed by "
_CLAUSE = re.compile(r"(?:creator's implicit grant|grant \S+) to .+? on (?P<memory>\S+) gives [a-z,]+(?=; |$)")
_CUT = "; inheritance cut off at restricted memory "
_MEMORY_ID = re.compile(r"hmem_[0-9a-f]{32}")


def cut_reason(reason: str, visible: Visible) -> str:
    """A logged reason as the caller may read it: clauses about grants on hidden memories give way to
    ABOVE_REACH; a hidden cutoff goes; any other hidden id is not named."""
    if reason.startswith(_ALLOWED):
        clauses = _clauses(reason[len(_ALLOWED):])
        if clauses is not None:
            kept = [text for text, memory in clauses if visible(memory)]
            return reason if len(kept) == len(clauses) else _allowed(kept, True)
    elif reason.startswith("refused: ") and _CUT in reason:
        head, _, cutoff = reason.rpartition(_CUT)
        if not visible(cutoff):
            reason = head
    return _MEMORY_ID.sub(lambda m: m.group(0) if visible(m.group(0)) else "a memory out of your reach", reason)


def _clauses(body: str) -> list[tuple[str, str]] | None:
    """(clause, memory it names) for each clause, or None when the text is not in that shape."""
    found: list[tuple[str, str]] = []
    position = 0
    while True:
        match = _CLAUSE.match(body, position)
        if match is None:
            return None
        found.append((match.group(0), match["memory"]))
        position = match.end()
        if position == len(body):
            return found
        position += 2  # the "; " between clauses


def sees(tree: TreeView, principals: frozenset[str], memory_id: str) -> bool:
    """Whether the caller may know the memory exists: it holds some privilege there."""
    return tree.exists(memory_id) and bool(access.effective(tree, principals, memory_id))


def grants_in_reach(tree: TreeView, principals: frozenset[str], memory_id: str) -> list[Grant]:
    """The grants that reach a memory (its own, then its ancestors' up to the restricted cutoff), from the
    memory upwards as long as the caller sees each node: none on a node above the caller's reach."""
    found: list[Grant] = []
    for node in access.explain(tree, principals, memory_id).path:  # up to the cutoff, bounded
        if not sees(tree, principals, node):
            break
        found.extend(tree.grants_on(node))
    return found


def held_anywhere(tree: TreeView, principals: frozenset[str]) -> frozenset[str]:
    """Every privilege the caller holds on some memory: what it may be offered to do at all."""
    held: set[str] = set()
    for privileges in access.granted(tree, principals).values():
        held |= privileges
    return frozenset(held)
