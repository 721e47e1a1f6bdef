"""The decision log survives kill -9: what decide() returned from is stored once, after the next start.

A child process (audit_crash_child.py, run with this interpreter) decides entries and is killed with
SIGKILL; a new AuditLog on the same data dir and database replays the journal.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from gateway.audit import AuditLog, AuditQuery
from gateway.audit.store import entries_table
from tests._postgres import PG_URL, fresh_schema

REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("audit_crash_child.py")


@dataclass
class Database:
    url: str
    schema: str
    engine: AsyncEngine


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    """A SQLite file, or a PostgreSQL schema of the test's own (dropped afterwards), for child and parent."""
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path}/audit.db"
        engine = create_async_engine(url)
        yield Database(url, "", engine)
        await engine.dispose()
        return
    async with fresh_schema("audit_crash") as (admin, schema):
        yield Database(PG_URL, schema, admin.execution_options(schema_translate_map={None: schema}))


def run_and_kill(db: Database, data_dir: Path, *args: str) -> None:
    """Start the child, wait for its "ready" line, SIGKILL it at once."""
    command = [sys.executable, str(CHILD), "--db", db.url, "--schema", db.schema, "--data-dir", str(data_dir),
               *args]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], 120)  # a guard against hanging, not a measurement
        line = child.stdout.readline() if ready else b""
        if line.strip() != b"ready":
            child.kill()
            _, err = child.communicate()
            pytest.fail(f"the child never got ready: {line!r}\n{err.decode(errors='replace')}")
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL


async def stored_ids(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        result = await conn.execute(sa.select(entries_table.c.request_id).order_by(entries_table.c.seq))
        return [str(r) for r in result.scalars()]


async def recover(db: Database, data_dir: Path) -> list[str]:
    """Open a new AuditLog on the crashed one's data: start() replays; return the stored ids after a verify."""
    log = AuditLog(db.engine, data_dir, flush_interval=3600)
    await log.start()
    try:
        report = await log.verify()
        assert report.ok, report
        ids: list[str] = []
        cursor: str | None = None
        while True:
            rows, cursor = await log.query(AuditQuery(), cursor, 1000)
            ids.extend(r["request_id"] for r in rows)
            if cursor is None:
                break
        assert report.checked == len(ids)
        return ids
    finally:
        await log.close()


async def test_journaled_entries_survive_a_kill_before_any_flush(database: Database, tmp_path: Path) -> None:
    """Killed before its first flush, the child left nothing in the table; start() restores all 1500."""
    data_dir = tmp_path / "data"
    run_and_kill(database, data_dir, "--mode", "hold", "--count", "1500")
    assert await stored_ids(database.engine) == []
    assert await recover(database, data_dir) == [f"req-{i}" for i in range(1500)]
    segments = sorted((data_dir / "audit-journal").glob("*.log"))  # the child's was 1, replayed and deleted
    assert [(p.name, p.stat().st_size) for p in segments] == [("000000000002.log", 0)]


async def test_a_kill_after_a_partial_flush_neither_loses_nor_duplicates(database: Database, tmp_path: Path):
    """600 entries were committed before the kill and 900 only journaled: after replay, 1500, each once."""
    data_dir = tmp_path / "data"
    run_and_kill(database, data_dir, "--mode", "hold", "--count", "1500", "--flushed", "600")
    assert await stored_ids(database.engine) == [f"req-{i}" for i in range(600)]
    assert await recover(database, data_dir) == [f"req-{i}" for i in range(1500)]


async def test_kills_in_mid_stream_keep_an_unbroken_prefix(database: Database, tmp_path: Path) -> None:
    """Killed while deciding and flushing (twice in a row), every run's entries are a gap-free prefix."""
    data_dir = tmp_path / "data"
    run_and_kill(database, data_dir, "--mode", "stream", "--count", "400", "--prefix", "a")
    run_and_kill(database, data_dir, "--mode", "stream", "--count", "400", "--prefix", "b")
    ids = await recover(database, data_dir)
    a = [x for x in ids if x.startswith("a-")]
    b = [x for x in ids if x.startswith("b-")]
    assert ids == a + b  # the second run's entries all follow the first's
    assert len(a) >= 400 and len(b) >= 400
    assert a == [f"a-{i}" for i in range(len(a))]
    assert b == [f"b-{i}" for i in range(len(b))]
