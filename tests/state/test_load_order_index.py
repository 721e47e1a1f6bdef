"""The load reads memories in key order from an index, not by sorting them first: a store made before the
index gets it when opened, and SQLite's plan for the load's query then needs no sort of its own."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.dialects import sqlite

from gateway.state import schema as t
from gateway.state.loading import memories_in_key_order
from gateway.state.store import StateStore


def _plan(path: Path) -> str:
    query = memories_in_key_order().compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True})
    db = sqlite3.connect(path)
    try:
        return " | ".join(str(row[-1]) for row in db.execute(f"EXPLAIN QUERY PLAN {query}"))
    finally:
        db.close()


async def test_a_store_made_before_the_index_gets_it_and_the_load_sorts_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    engine = create_engine(f"sqlite:///{path}")
    t.metadata.create_all(engine)
    engine.dispose()
    db = sqlite3.connect(path)
    db.execute(f"DROP INDEX {t.memories_by_key.name}")  # as a store made before the index was
    db.commit()
    db.close()
    assert "TEMP B-TREE" in _plan(path)  # the premise: without the index the load's query sorts every row
    store = await StateStore.open(f"sqlite+aiosqlite:///{path}")
    await store.close()
    plan = _plan(path)
    assert "TEMP B-TREE" not in plan and str(t.memories_by_key.name) in plan, plan
