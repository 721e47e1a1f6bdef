"""The terms of a text as the local provider's word index keeps them: FTS5's own tokenizer, asked through a
private in-memory word index configured exactly as `versions_fts` (adapters/local/_schema.py `TOKENIZE`).

Recall's per-memory counts are kept on write, per term (adapters/local/_kept.py): a version adds one to
each distinct term it holds, and a question's word is looked up by its term. Both must be the terms FTS5
makes ("Renewals" is `renew`, "Zürich" is `zurich`), and SQLite offers no SQL function that tokenizes, so
the text is written into a contentless FTS5 table of its own and read back through fts5vocab. Nothing of
it outlives the call: the table is emptied ('delete-all') before the answer is returned.

One such database per thread (a sqlite3 connection belongs to the thread that made it): the provider's
connections call `terms_json` as the SQL function `memfed_terms` on their own threads, and recall's
statement builder calls `phrase_term` on the event loop's.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading

from adapters.local._schema import TOKENIZE

_TOKENS = threading.local()


def _index() -> sqlite3.Connection:
    db: sqlite3.Connection | None = getattr(_TOKENS, "db", None)
    if db is None:
        db = sqlite3.connect(":memory:", isolation_level=None)
        db.execute(f"CREATE VIRTUAL TABLE words USING fts5(title, body, content='', tokenize='{TOKENIZE}')")
        db.execute("CREATE VIRTUAL TABLE distinct_terms USING fts5vocab(words, 'row')")
        db.execute("CREATE VIRTUAL TABLE term_instances USING fts5vocab(words, 'instance')")
        _TOKENS.db = db
    return db


def terms(title: str | None, body: str | None) -> list[str]:
    """The distinct terms of one version (title and body as the word index holds them), in term order."""
    db = _index()
    db.execute("INSERT INTO words (rowid, title, body) VALUES (1, ?, ?)", (title or "", body or ""))
    try:
        return [row[0] for row in db.execute("SELECT term FROM distinct_terms")]
    finally:
        db.execute("INSERT INTO words (words) VALUES ('delete-all')")


def terms_json(title: str | None, body: str | None) -> str:
    """`terms` as a JSON array, for `json_each`. Registered as `memfed_terms`."""
    return json.dumps(terms(title, body))


@functools.lru_cache(maxsize=4096)
def phrase_term(phrase: str) -> str | None:
    """The one term a recall phrase (one quoted word, adapters/local/_sql.py) stands for, or None when
    the tokenizer makes it none or several: such a phrase is counted in the word index, not looked up.
    Cached: questions repeat their words, and the answer never changes for a given phrase."""
    db = _index()
    # The phrase is quoted FTS5 syntax; its text between the quotes is what the index tokenizes.
    text = phrase[1:-1].replace('""', '"') if len(phrase) >= 2 and phrase[0] == phrase[-1] == '"' else phrase
    db.execute("INSERT INTO words (rowid, title, body) VALUES (1, ?, '')", (text,))
    try:
        found = [row[0] for row in db.execute("SELECT term FROM term_instances")]
    finally:
        db.execute("INSERT INTO words (words) VALUES ('delete-all')")
    return found[0] if len(found) == 1 else None
