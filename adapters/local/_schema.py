"""How the local provider keeps a record: the tables of its SQLite file (a `Record` as a row and back is
adapters/version_rows.py, shared with the PostgreSQL provider).

Pure functions and constants, no I/O: adapters/local/_sql.py builds the statements over these tables,
and `adapters/local/provider.py` runs them.

Every version of a record is one row of `versions`; the row that has no `invalidated_at` is the
current one. A version written by `forget` has `forgets = 1`. `write_id` is the memfed write that made
the version (unique in a memory, so a write sent twice is kept once), added in schema version 2: a file
from before gains the column and its index when it is opened (`WRITE_ID_COLUMN`). `words` (schema version 3)
is the version's length in tokens as FTS5 counted them, read off the word index's own sizes when the version
is written: recall ranks a memory's records by statistics of that memory alone (adapters/local/_sql.py),
which needs each version's length beside its memory. `superseded` is never stored: it is
read off `invalidated_at`, so that a read `as_of` an earlier instant can show a version as it stood
then (active, not yet closed) from the same row. `versions_fts` holds the words of every version,
keyed by the version's `seq`, so that a recall `as_of` searches what was current at that instant.

`memory_sizes` and `memory_terms` (schema version 4) are recall's per-memory counts, kept on every write
(adapters/local/_kept.py): over the current versions of a memory, by type and by forgotten or not, how many
there are and their total length, and how many hold each term. A file from before gains them filled.
"""

from __future__ import annotations

from adapters.base import Record

# The row encoding is shared with the PostgreSQL provider (adapters/version_rows.py); re-exported here
# under the names this package has always read it by.
from adapters.version_rows import Row as Row
from adapters.version_rows import columns as columns
from adapters.version_rows import from_ts as from_ts
from adapters.version_rows import parse_instant as parse_instant
from adapters.version_rows import record as record
from adapters.version_rows import to_json as to_json
from adapters.version_rows import ts as ts
from adapters.version_rows import ts_or_none as ts_or_none
from adapters.version_rows import utc as utc

SCHEMA_VERSION = 4

# How the word index cuts text into terms; adapters/local/_terms.py tokenizes with the same configuration.
TOKENIZE = "porter unicode61 remove_diacritics 2"

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS versions (
    seq            INTEGER PRIMARY KEY,
    memory_id      TEXT NOT NULL,
    record_id      TEXT NOT NULL,
    version        INTEGER NOT NULL,
    forgets        INTEGER NOT NULL DEFAULT 0,
    supersedes     INTEGER,
    type           TEXT NOT NULL,
    title          TEXT,
    content        TEXT NOT NULL,
    attributes     TEXT NOT NULL,
    refs           TEXT NOT NULL,
    follows        TEXT,
    written_by     TEXT NOT NULL,
    written_at     TEXT NOT NULL,
    invalidated_at TEXT,
    valid_from     TEXT,
    valid_to       TEXT,
    write_id       TEXT,
    words          INTEGER,
    UNIQUE (record_id, version)
);
CREATE INDEX IF NOT EXISTS versions_listing
    ON versions (memory_id, invalidated_at, written_at, record_id);
CREATE VIRTUAL TABLE IF NOT EXISTS versions_fts USING fts5(
    title, body, tokenize = '{TOKENIZE}'
);
CREATE TABLE IF NOT EXISTS memory_sizes (
    memory_id TEXT NOT NULL,
    type      TEXT NOT NULL,
    forgets   INTEGER NOT NULL,
    records   INTEGER NOT NULL,
    words     INTEGER NOT NULL,
    PRIMARY KEY (memory_id, type, forgets)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memory_terms (
    memory_id TEXT NOT NULL,
    term      TEXT NOT NULL,
    type      TEXT NOT NULL,
    forgets   INTEGER NOT NULL,
    records   INTEGER NOT NULL,
    PRIMARY KEY (memory_id, term, type, forgets)
) WITHOUT ROWID;
"""


# Run after SCHEMA: the column for a file made before it (skipped when present), then its index.
WRITE_ID_COLUMN = "ALTER TABLE versions ADD COLUMN write_id TEXT"
WRITE_ID_INDEX = (
    "CREATE UNIQUE INDEX IF NOT EXISTS versions_write ON versions (memory_id, write_id) WHERE write_id IS NOT NULL"
)

# Run after SCHEMA, like the write ids: the column for a file made before it, its values read off the word
# index, then the index that counting a memory's live records and summing their lengths read alone (the
# counts on every memory, and each recall's statistics); it replaces version 2's `versions_live`.
WORDS_COLUMN = "ALTER TABLE versions ADD COLUMN words INTEGER"
WORDS_INDEX = "CREATE INDEX IF NOT EXISTS versions_words ON versions (memory_id, invalidated_at, forgets, words)"
OLD_LIVE_INDEX = "DROP INDEX IF EXISTS versions_live"
# `memfed_words` is `fts_words`, registered on every connection (adapters/local/_connections.py).
SET_WORDS = (
    "UPDATE versions SET words = (SELECT memfed_words(sz) FROM versions_fts_docsize WHERE id = :seq) WHERE seq = :seq"
)
FILL_WORDS = (
    "UPDATE versions SET words = (SELECT memfed_words(d.sz) FROM versions_fts_docsize d WHERE d.id = versions.seq)"
    " WHERE words IS NULL"
)


def _varints(block: bytes | None) -> list[int]:
    """The SQLite varints of one of the word index's own records (big-endian groups of 7 bits, the high
    bit saying another byte follows)."""
    values: list[int] = []
    value = 0
    for byte in block or b"":
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            values.append(value)
            value = 0
    return values


def fts_words(sizes: bytes | None) -> int:
    """The tokens of one row of the word index, all columns together, from its `_docsize` entry: one
    varint per column."""
    return sum(_varints(sizes))


# The word index's averages record (row 1 of `versions_fts_data`): the rows it holds, then the tokens of
# each column over all of them. FTS5's bm25 reads its corpus size and mean length from it.
AVERAGES = "SELECT block FROM versions_fts_data WHERE id = 1"


def fts_rows(averages: bytes | None) -> int:
    """How many rows the word index holds, read off its averages record. Registered as `memfed_fts_rows`."""
    values = _varints(averages)
    return values[0] if values else 0


def fts_mean_length(averages: bytes | None) -> float:
    """The mean tokens of a row of the word index, all columns together, as FTS5's bm25 takes it.
    Registered as `memfed_fts_avgdl`."""
    values = _varints(averages)
    return sum(values[1:]) / values[0] if values and values[0] else 1.0


def searchable(record: Record) -> tuple[str, str]:
    """(title, body) for the full-text index: every part's words, a file part's included (§4.3)."""
    return record.title or "", "\n".join(p.text for p in record.content if p.text)
