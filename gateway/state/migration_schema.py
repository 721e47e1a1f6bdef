"""The tables that make a provider swap resumable: one row per migration, one per record it copied.

They join the gateway's `metadata` and are listed in gateway/state/tables.py, which is what
`StateStore.open` creates.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, String, Table, Text

from gateway.state.schema import metadata

migrations = Table(
    "migrations",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("memory_id", String(64), nullable=False, index=True),  # the memory named on the command
    Column("target", String(100), nullable=False),
    Column("recursive", Boolean, nullable=False, default=False),
    Column("status", String(16), nullable=False),  # running | failed | completed | abandoned
    Column("started_at", BigInteger, nullable=False),
    Column("finished_at", BigInteger, nullable=True),
    Column("copied", Integer, nullable=False, default=0),  # records whose every version is at the target
    Column("error", Text, nullable=False, default=""),
)

# One row per source record once its first version is at the target: the id it has there, and the
# last source version copied. A rerun reads these to skip what is done and to go on where it stopped.
migration_records = Table(
    "migration_records",
    metadata,
    Column("migration_id", String(64), primary_key=True),
    Column("memory_id", String(64), primary_key=True),
    Column("old_id", String(200), primary_key=True),
    Column("new_id", String(200), nullable=False),
    Column("source_version", Integer, nullable=False),
)

Index("ix_migration_records_new", migration_records.c.migration_id, migration_records.c.new_id)
