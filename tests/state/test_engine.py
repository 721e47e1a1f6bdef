"""The SQLite engine's set-up: a new file is switched to WAL even while another starter holds its lock."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from gateway.state.store import StateStore


async def test_a_store_opens_on_a_new_file_whose_lock_another_starter_holds_for_a_moment(tmp_path: Path) -> None:
    """Switching a file to WAL needs its exclusive lock, and SQLite refuses the switch at once ("database is
    locked") instead of waiting out the busy timeout. A replica starting beside another one met that (CI,
    four stores opened together). Here a plain connection holds the lock of a new rollback-journal file for
    0.3 s: the store waits for it, opens, and leaves the file in WAL."""
    path = tmp_path / "state.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE other_starter (id INTEGER)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO other_starter VALUES (1)")
    release = threading.Timer(0.3, holder.execute, args=("COMMIT",))
    release.start()
    try:
        store = await StateStore.open(f"sqlite+aiosqlite:///{path}")
        await store.close()
    finally:
        release.join()
        holder.close()
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
