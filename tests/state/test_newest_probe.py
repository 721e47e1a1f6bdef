"""The direct read of the newest change row that every request's coherence check makes on SQLite."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from sqlalchemy.engine import make_url

from gateway.state.newest import NewestProbe
from gateway.state.store import StateStore


async def test_the_direct_read_sees_what_another_instance_committed(tmp_path: Path) -> None:
    """The probe answers the newest committed seq, as the engine would, and B applies A's change from it."""
    url = f"sqlite+aiosqlite:///{tmp_path}/state.sqlite3"
    a, b = await StateStore.open(url), await StateStore.open(url)
    try:
        probe = NewestProbe(make_url(url))
        before = probe.newest()
        assert before is not None
        member = await a.create_member("Ann", "human")
        after = probe.newest()
        assert after is not None and after > before
        await b.catch_up()
        assert b.member(member.id) is not None
        probe.close()
    finally:
        await a.close()
        await b.close()


async def test_the_direct_read_never_waits_for_a_writer_and_never_sees_its_uncommitted_rows(tmp_path: Path) -> None:
    """With another connection inside a write transaction, the probe answers at once with the committed seq."""
    url = f"sqlite+aiosqlite:///{tmp_path}/state.sqlite3"
    store = await StateStore.open(url)
    try:
        await store.create_member("Ann", "human")
        probe = NewestProbe(make_url(url))
        committed = probe.newest()
        writer = sqlite3.connect(tmp_path / "state.sqlite3", isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO state_changes (kind, entity, at) VALUES ('member', 'm-x', 0)")
        started = time.monotonic()
        assert probe.newest() == committed
        assert time.monotonic() - started < 1.0  # not the writer's lock, nor any busy timeout
        writer.execute("COMMIT")
        writer.close()
        assert probe.newest() == (committed or 0) + 1
        probe.close()
    finally:
        await store.close()


async def test_a_store_whose_direct_read_cannot_answer_asks_the_engine(tmp_path: Path) -> None:
    """No file to read directly (or SQLite in memory, or PostgreSQL): None, and catch_up asks the engine."""
    assert NewestProbe(make_url(f"sqlite+aiosqlite:///{tmp_path}/absent.sqlite3")).newest() is None
    assert NewestProbe(make_url("sqlite+aiosqlite:///:memory:")).newest() is None
    assert NewestProbe(make_url("postgresql+asyncpg://u@localhost/test")).newest() is None
    url = f"sqlite+aiosqlite:///{tmp_path}/state.sqlite3"
    a, b = await StateStore.open(url), await StateStore.open(url)
    try:
        b._newest = NewestProbe(make_url(f"sqlite+aiosqlite:///{tmp_path}/absent.sqlite3"))
        member = await a.create_member("Ann", "human")
        await b.catch_up()
        assert b.member(member.id) is not None
    finally:
        await a.close()
        await b.close()
