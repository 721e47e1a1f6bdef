"""What the gateway itself keeps: who exists, the tree of memories and its grants, files, and the tables.

`store.StateStore` holds members, keys, groups, memories and grants in SQL and mirrors them in memory
(`directory`, `tree`) so that a decision costs no round trip; `coherence` keeps that mirror current when
several instances share the database; `tree_writes` makes each tree change atomic; `files` and `file_uses`
keep file bytes and who refers to them; `schema` and the `*_schema` modules define every table and
`tables` registers each one (what `StateStore.open` creates). Routes build no SQL: they call the typed
repositories the store carries, `queries` (named queries), `consolidations` (runs and their changes),
`harnesses` (harnesses and the prime log), `records` (snapshots, record aliases), and `store.ping`.
"""

from gateway.state.directory import GroupRow, Member
from gateway.state.store import StateStore
from gateway.state.tree import MemoryNode, Tree
from gateway.state.tree_check import StateCorrupt
from gateway.state.tree_writes import TreeRefused

__all__ = ["GroupRow", "Member", "MemoryNode", "StateCorrupt", "StateStore", "Tree", "TreeRefused"]
