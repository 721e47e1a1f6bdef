"""The gateway's own tables: who exists, the tree, the grants. No record content lives here.

SQLAlchemy Core, so one definition serves SQLite (the default) and PostgreSQL.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

members = Table(
    "members",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(300), nullable=False),
    Column("type", String(16), nullable=False),
    Column("is_admin", Boolean, nullable=False, default=False),
    Column("external_subject", String(500), nullable=True, unique=True),
    Column("created_at", BigInteger, nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("member_id", String(64), ForeignKey("members.id", ondelete="CASCADE"), nullable=False),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("created_at", BigInteger, nullable=False),
)

groups = Table(
    "groups",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(300), nullable=False, unique=True),
    Column("created_at", BigInteger, nullable=False),
)

group_members = Table(
    "group_members",
    metadata,
    Column("group_id", String(64), ForeignKey("groups.id", ondelete="CASCADE"), primary_key=True),
    Column("member_id", String(64), ForeignKey("members.id", ondelete="CASCADE"), primary_key=True),
)

memories = Table(
    "memories",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(300), nullable=False),
    Column("description", Text, nullable=False, default=""),
    Column("parent_id", String(64), nullable=True, index=True),
    Column("restricted", Boolean, nullable=False, default=False),
    Column("provider", String(100), nullable=False),
    Column("created_by", String(64), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)
# The order the load reads memories in (gateway/state/loading.py): the database streams them from the index
# instead of sorting a million rows before the first one comes.
memories_by_key = Index("ix_memories_created_at_id", memories.c.created_at, memories.c.id)

grants = Table(
    "grants",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("memory_id", String(64), nullable=False, index=True),
    Column("principal", String(200), nullable=False, index=True),
    Column("privileges", String(64), nullable=False),
    Column("implicit", Boolean, nullable=False, default=False),
    Column("created_at", BigInteger, nullable=False),
)

# Every change to what instances hold in memory (members, keys, groups, memberships, memories, grants),
# written in the transaction that makes it: gateway/state/coherence.py reads it before each decision.
state_changes = Table(
    "state_changes",
    metadata,
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("kind", String(16), nullable=False),
    Column("entity", String(64), nullable=False),
    Column("at", BigInteger, nullable=False),
    sqlite_autoincrement=True,  # never hand out a seq again once its row is pruned
)

# The entities of one `state_changes` row of kind "batch" (a bulk tree import writes one a slice of many
# memories): each kind's ids, one a line. Pruned with the change log.
change_batches = Table(
    "change_batches",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("kind", String(16), primary_key=True),
    Column("entities", Text, nullable=False),
    Column("at", BigInteger, nullable=False),
)

files = Table(
    "files",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("owner", String(200), nullable=False),
    Column("filename", String(500), nullable=False),
    Column("media_type", String(200), nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("purpose", String(100), nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

snapshots = Table(
    "snapshots",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("memory_id", String(64), nullable=False, index=True),
    Column("name", String(300), nullable=False),
    Column("message", Text, nullable=False, default=""),
    Column("at", BigInteger, nullable=False),
    Column("created_by", String(64), nullable=False),
    UniqueConstraint("memory_id", "name"),
)

# One row per (principal, Idempotency-Key), claimed before the request's work runs, so a repeat on any
# gateway sharing this database sees it (gateway/federation/idempotency.py). `state`: `running` (held by `owner`
# until `lease_until`, renewed while it runs), `done` (the answer in status and body, replayed), `failed`
# (a 5xx after which nothing was written: a repeat runs again), `unknown` (a write may have reached the
# provider: a repeat first looks for `write_id` there; `unknown_since` is when it may last have been sent).
# It replaces the table `idempotency` of earlier versions, which only held answers and is no longer read.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("principal", String(200), primary_key=True),
    Column("key", String(300), primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("state", String(16), nullable=False),
    Column("write_id", String(64), nullable=False),
    Column("owner", String(64), nullable=False),
    Column("lease_until", BigInteger, nullable=False),
    Column("unknown_since", BigInteger, nullable=True),
    Column("status", Integer, nullable=True),
    Column("body", Text, nullable=True),
    Column("created_at", BigInteger, nullable=False),
)

record_aliases = Table(
    "record_aliases",
    metadata,
    Column("memory_id", String(64), primary_key=True),
    Column("old_id", String(200), primary_key=True),
    Column("new_id", String(200), nullable=False),
)

Index("ix_record_aliases_new", record_aliases.c.memory_id, record_aliases.c.new_id)
