"""The newest change row, read without leaving the event loop when the state is a local SQLite file.

`StateStore.catch_up` runs before every request's decision. Through the async engine that one indexed
`max` is a pool checkout, the statement, a rollback and a check-in, each a hop to aiosqlite's thread and
back: ~0.3 ms on an idle gateway, and tens of milliseconds on a busy two-core machine, where every hop
waits for the other thread to be scheduled and for the GIL. One connection of its own, read-only, asked
on the loop's thread, answers the same question in microseconds: in WAL mode a reader takes no lock a
writer holds, and with no busy timeout it never sleeps, so it cannot stall the loop. When it cannot
answer at once (a busy WAL index, a file it cannot open) it says so, and the caller asks the engine as
before. PostgreSQL, and SQLite held in memory, are always asked through the engine.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from sqlalchemy.engine import URL

log = logging.getLogger("memfed.state")

_NEWEST = "SELECT max(seq) FROM state_changes"


class NewestProbe:
    def __init__(self, url: URL) -> None:
        database = url.database if url.get_backend_name() == "sqlite" else None
        self._path = Path(database) if database and database != ":memory:" and "mode=memory" not in database \
            else None
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    def newest(self) -> int | None:
        """The newest change's seq, or None when this probe cannot tell without waiting."""
        if self._path is None or self._closed:
            return None
        try:
            if self._conn is None:
                # Read-only, autocommit (each SELECT its own snapshot), never waiting for a lock.
                self._conn = sqlite3.connect(f"{self._path.resolve().as_uri()}?mode=ro", uri=True, timeout=0,
                                             isolation_level=None, check_same_thread=False)
            row = self._conn.execute(_NEWEST).fetchone()
        except sqlite3.Error as exc:
            log.debug("newest change: the direct read failed (%s); asking the engine", exc)
            self.close(reopen=True)
            return None
        return int(row[0] or 0)

    def close(self, *, reopen: bool = False) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._closed = not reopen
