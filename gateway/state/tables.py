"""Every table of the gateway's state store, registered in one place.

`StateStore.open` creates exactly these, so a table exists because it is listed here, never because
some module that defines it happened to be imported first (a fresh store opened by a CLI command that
imports no route still has every table). The decision log keeps its own tables (gateway/audit/store.py),
handed to `StateStore.open` as a creator by whoever opens the store with an audit.
"""

from __future__ import annotations

from sqlalchemy import Connection, Index, MetaData, Table
from sqlalchemy.ext.asyncio import AsyncConnection

from gateway.state import consolidation_schema, file_uses, harness_schema, migration_schema, query_schema
from gateway.state import schema as t

metadata: MetaData = t.metadata

TABLES: tuple[Table, ...] = (
    # who exists, the tree, the grants, and the change log that keeps instances coherent
    t.members, t.api_keys, t.groups, t.group_members, t.memories, t.grants, t.state_changes, t.change_batches,
    # files and where they are used, snapshots, idempotency, record ids a provider replaced
    t.files, file_uses.file_uses, t.snapshots, t.idempotency_keys, t.record_aliases,
    # named queries; harnesses, what prime placed, the observe outbox and its jobs
    query_schema.named_queries,
    harness_schema.harnesses, harness_schema.prime_log, harness_schema.observe_outbox, harness_schema.observe_jobs,
    # consolidation runs and their changes; provider swaps and the records they moved
    consolidation_schema.consolidation_runs, consolidation_schema.consolidation_changes,
    migration_schema.migrations, migration_schema.migration_records,
)


# Indexes added after their tables: `create_all` makes a table's indexes only with the table, so a store made
# before them gets them here (once: the first start after the upgrade builds them, under the startup lock).
LATER_INDEXES: tuple[Index, ...] = (t.memories_by_key,)


async def create_all(conn: AsyncConnection) -> None:
    """Create every listed table (and its indexes) that does not exist yet, inside the caller's transaction."""

    def create(sync: Connection) -> None:
        metadata.create_all(sync, tables=list(TABLES))
        for index in LATER_INDEXES:
            index.create(sync, checkfirst=True)

    await conn.run_sync(create)
