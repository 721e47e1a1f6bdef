"""Named queries (UHP Memories §6.4), kept by the gateway per memory.

On the same `metadata` as gateway/state/schema.py and listed in gateway/state/tables.py, which is what
`StateStore.open` creates.

The gateway, not the provider, keeps them: who may define and run one is a grant question, and a
memory moved to another provider keeps its queries (which then answer `memory_unsupported` if the new
provider does not speak their language).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, String, Table, Text

from gateway.state.schema import metadata

named_queries = Table(
    "named_queries",
    metadata,
    Column("memory_id", String(64), primary_key=True),
    Column("name", String(64), primary_key=True),
    Column("description", Text, nullable=False, default=""),
    Column("params", Text, nullable=False),  # the JSON Schema of `params`, as JSON text
    Column("requires", String(8), nullable=False),  # read | write
    Column("language", String(50), nullable=False),
    Column("body", Text, nullable=False),
    Column("created_by", String(64), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_by", String(64), nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)
