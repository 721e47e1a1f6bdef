# ruff: noqa: S608 - statements here are assembled only from this module's own fragments; every value
# that comes from a caller (ids, seqs) is bound as a parameter, never spliced.
"""Recall's per-memory counts, kept on write in `memory_sizes` and `memory_terms` (adapters/local/_schema.py)
instead of counted at each recall.

A memory is its own corpus for bm25 (adapters/local/_recall_sql.py): how many versions a recall could answer
in it, their mean length and how many of them hold each word. Counted at query time, that read every
version of every memory asked and every hit of every word asked, across all memories, whatever the
question then kept: four times the time of the ranking itself. Kept here, a recall reads one row per
memory, type and word.

The counts are over current versions (no `invalidated_at`), split by type and by `forgets`, so that the
scopes a recall can ask without `as_of` (active or all, some types or every one) are sums of rows. A recall
`as_of` an earlier instant still counts at query time: its versions are not the current ones.

Pure constants and functions, no I/O: `adapters/local/provider.py` runs them in the transaction that changes
the versions, with `memfed_terms` (adapters/local/_terms.py) registered on the connection:
- a version appended: `change(SEQ, +1)` once it and its words are written;
- a version closed (revised, forgotten): `change(CLOSING, -1)` before it is closed;
- versions erased: `change(where, -1)`, then `emptied(where)` before they are deleted: a term no longer held by
  any current version of the memory leaves no row behind, so an erased record's words are not in the file;
- a memory dropped: `DROP` with the memory's id.
A term whose last holder was only revised away keeps a row of 0: its words are still in the version kept.
"""

from __future__ import annotations

SEQ = "v.seq = :seq"
CLOSING = "v.record_id = :record AND v.version = :version"

# Each version's distinct terms as the word index holds them, from the index's own copy of its text.
_TERMS = "FROM versions v JOIN versions_fts f ON f.rowid = v.seq JOIN json_each(memfed_terms(f.title, f.body)) t"


def change(selection: str, delta: int) -> tuple[str, str]:
    """Add `delta` (1 or -1) for each current version matching `selection` (SQL over alias `v`): to its
    memory's size and length, and to each of its terms' counts."""
    sizes = (
        "INSERT INTO memory_sizes (memory_id, type, forgets, records, words)"
        f" SELECT v.memory_id, v.type, v.forgets, {delta:d} * count(*), {delta:d} * coalesce(sum(v.words), 0)"
        f" FROM versions v WHERE ({selection}) AND v.invalidated_at IS NULL GROUP BY v.memory_id, v.type, v.forgets"
        " ON CONFLICT (memory_id, type, forgets) DO UPDATE"
        " SET records = records + excluded.records, words = words + excluded.words"
    )
    terms = (
        "INSERT INTO memory_terms (memory_id, term, type, forgets, records)"
        f" SELECT v.memory_id, t.value, v.type, v.forgets, {delta:d} * count(*) {_TERMS}"
        f" WHERE ({selection}) AND v.invalidated_at IS NULL GROUP BY v.memory_id, t.value, v.type, v.forgets"
        " ON CONFLICT (memory_id, term, type, forgets) DO UPDATE SET records = records + excluded.records"
    )
    return sizes, terms


def emptied(selection: str) -> tuple[str, str]:
    """Delete the rows left at 0 that name a type or a term of a version matching `selection`, closed
    versions included (their words may be the last left of a term): run after `change(selection, -1)`,
    before the versions are deleted."""
    return (
        "DELETE FROM memory_sizes WHERE records = 0 AND (memory_id, type, forgets) IN"
        f" (SELECT v.memory_id, v.type, v.forgets FROM versions v WHERE {selection})",
        "DELETE FROM memory_terms WHERE records = 0 AND (memory_id, term) IN"
        f" (SELECT v.memory_id, t.value {_TERMS} WHERE {selection})",
    )


DROP = (
    "DELETE FROM memory_sizes WHERE memory_id = :memory",
    "DELETE FROM memory_terms WHERE memory_id = :memory",
)

# Every count made again from the versions: a file from before schema version 4, on opening.
REFILL = (
    "DELETE FROM memory_sizes",
    "DELETE FROM memory_terms",
    *change("1", 1),
)
