"""The PostgreSQL provider's table, in a schema of its own, and how it is made once by racing replicas.

The row is the SQLite provider's (adapters/version_rows.py: instants as fixed-width UTC text, JSON as
text), so a `Record` reads the same from either. Two columns differ: `seq` is a bigserial, and `words`
is the version's tsvector (title weighted A, body B) made at insert with the configured text-search
configuration, so that recall `as_of` searches what was current then. Text columns that are compared or
ordered are `COLLATE "C"`: byte order is what makes the fixed-width instants and the ids sort as the
SQLite provider sorts them, whatever the database's own collation.
"""

from __future__ import annotations

import re

from adapters.version_rows import Row as Row

DEFAULT_SCHEMA = "memfed_records"
DEFAULT_TEXT_CONFIG = "english"

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}\Z")

# Column names a read selects, in the order of the SQLite provider's row (`words` is never read back).
COLUMNS = (
    "seq", "memory_id", "record_id", "version", "forgets", "supersedes", "type", "title", "content",
    "attributes", "refs", "follows", "written_by", "written_at", "invalidated_at", "valid_from", "valid_to",
    "write_id",
)  # fmt: skip


def identifier(value: object, what: str) -> str:
    """A schema or text-search configuration name, checked because it is spliced into DDL (it cannot be
    bound): lower-case letters, digits and underscores only."""
    if not isinstance(value, str) or not _IDENTIFIER.match(value):
        raise ValueError(f"{what} must be a lower-case SQL identifier (letters, digits, _), not {value!r}")
    return value


def ddl(schema: str) -> tuple[str, ...]:
    """The statements that make the schema, run in one transaction under `SETUP_LOCK`."""
    t = f'"{schema}".versions'
    return (
        f'CREATE SCHEMA IF NOT EXISTS "{schema}"',
        f"""CREATE TABLE IF NOT EXISTS {t} (
            seq            BIGSERIAL PRIMARY KEY,
            memory_id      TEXT COLLATE "C" NOT NULL,
            record_id      TEXT COLLATE "C" NOT NULL,
            version        INTEGER NOT NULL,
            forgets        INTEGER NOT NULL DEFAULT 0,
            supersedes     INTEGER,
            type           TEXT COLLATE "C" NOT NULL,
            title          TEXT,
            content        TEXT NOT NULL,
            attributes     TEXT NOT NULL,
            refs           TEXT NOT NULL,
            follows        TEXT,
            written_by     TEXT NOT NULL,
            written_at     TEXT COLLATE "C" NOT NULL,
            invalidated_at TEXT COLLATE "C",
            valid_from     TEXT COLLATE "C",
            valid_to       TEXT COLLATE "C",
            write_id       TEXT COLLATE "C",
            words          TSVECTOR NOT NULL,
            UNIQUE (record_id, version)
        )""",
        f"CREATE INDEX IF NOT EXISTS versions_listing ON {t} (memory_id, invalidated_at, written_at, record_id)",
        f"CREATE INDEX IF NOT EXISTS versions_live ON {t} (memory_id, invalidated_at, forgets)",
        f"CREATE UNIQUE INDEX IF NOT EXISTS versions_write ON {t} (memory_id, write_id) WHERE write_id IS NOT NULL",
        f"CREATE INDEX IF NOT EXISTS versions_words ON {t} USING GIN (words)",
    )


# Replicas started together each run the DDL; CREATE ... IF NOT EXISTS is not safe against a concurrent
# twin (both pass the check, one fails on the catalog's unique index), so they take turns on this lock.
SETUP_LOCK = "memfed_records:setup"
