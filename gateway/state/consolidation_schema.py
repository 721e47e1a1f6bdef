"""Consolidation runs (§9.2) as the gateway keeps them: one row per run, one per change it wrote.

On the same `metadata` as gateway/state/schema.py and listed in gateway/state/tables.py, which is what
`StateStore.open` creates.

The run belongs to the gateway, not the provider: the gateway mints its id, stamps it on what the
provider writes, keeps what the provider reported, and is the one that answers `memory_busy`. So a
provider that forgets its runs (or is swapped for another) cannot take the means to undo one with it.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, String, Table, Text

from gateway.state.schema import metadata

# `read`, `changes`, `budget` and `usage` are JSON objects in the §9.2 shape. `reverts` names the run a
# revert undid (a revert is a run of its own, so history keeps both); `reverted_by` the revert of this one.
consolidation_runs = Table(
    "consolidation_runs",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("memory_id", String(64), nullable=False),
    Column("provider", String(100), nullable=False),
    Column("status", String(16), nullable=False),  # queued | running | completed | stopped | failed
    Column("trigger", String(16), nullable=False),  # manual | schedule
    Column("started_at", BigInteger, nullable=False),  # milliseconds, like every other stamp here
    Column("finished_at", BigInteger, nullable=True),
    Column("read", Text, nullable=False, default="{}"),
    Column("changes", Text, nullable=False, default="{}"),
    Column("budget", Text, nullable=False, default="{}"),
    Column("usage", Text, nullable=False, default="{}"),
    Column("resumed_after", String(40), nullable=True),
    Column("reverts", String(64), nullable=True),
    Column("reverted_by", String(64), nullable=True),
    Column("created_by", String(200), nullable=False),
    Column("error", Text, nullable=False, default=""),
)

Index("ix_consolidation_runs_memory", consolidation_runs.c.memory_id, consolidation_runs.c.started_at)

# One row per version a run wrote, in the order it wrote them (`seq`), which is also the order a revert
# undoes them in, backwards.
consolidation_changes = Table(
    "consolidation_changes",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("record_id", String(200), nullable=False),
    Column("kind", String(16), nullable=False),  # created | superseded | forgotten
    Column("version", Integer, nullable=False),
    Column("reverted", Boolean, nullable=False, default=False),
)
