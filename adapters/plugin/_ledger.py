"""What memfed keeps beside a plugin: which memory each record is in, and what the plugin cannot hold.

A plugin record has a slug, a fixed MemoryType and MemoryScope, a title and text, and nothing else: no
memory, no writer, no attributes, no validity, no version. The ledger (SQLite in the provider's data
directory) keeps, per memfed record, its memory, the slug the plugin gave it, memfed's type and version
number, and that envelope. It keeps no content: the text lives at the plugin only, which is what makes the
plugin, not memfed, the store (and erase there the erase). A plugin record the ledger does not know
(written by an agent kernel straight to the plugin) is in no memory and memfed never shows it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite

from adapters.base import Reference, Writer, utc, writer_to_json

SCHEMA = """
CREATE TABLE IF NOT EXISTS plugin_records (
    record_id TEXT PRIMARY KEY,
    memory_id TEXT NOT NULL,
    slug TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    version INTEGER NOT NULL,
    envelope TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS plugin_records_memory ON plugin_records (memory_id);
"""


@dataclass(frozen=True)
class Entry:
    record_id: str
    memory_id: str
    slug: str
    type: str
    version: int
    written_by: Writer
    written_at: datetime
    valid_from: datetime | None
    valid_to: datetime | None
    titled: bool  # a title of "" at the plugin is no title (the wire has no absent title)
    attributes: Mapping[str, Any]
    references: tuple[Reference, ...]
    dangling: tuple[str, ...]  # [[name]] links naming no record (yet): kept, so they can be found later
    write_id: str | None
    # "forgotten": a tombstone. The plugin no longer has the record; the entry stays so the forget can be
    # found by its write id, and is dropped by erase or when the memory goes.
    status: str = "active"

    def envelope(self) -> str:
        return json.dumps({
            "written_by": writer_to_json(self.written_by),
            "written_at": utc(self.written_at).isoformat(),
            "valid_from": utc(self.valid_from).isoformat() if self.valid_from else None,
            "valid_to": utc(self.valid_to).isoformat() if self.valid_to else None,
            "titled": self.titled,
            "attributes": dict(self.attributes),
            "references": [[r.memory_id, r.record_id, r.rel] for r in self.references],
            "dangling": list(self.dangling),
            "write_id": self.write_id,
            "status": self.status,
        }, separators=(",", ":"))


def _entry(row: Iterable[Any]) -> Entry:
    record_id, memory_id, slug, rtype, version, raw = row
    env = json.loads(raw)
    w = env["written_by"]

    def at(value: str | None) -> datetime | None:
        return datetime.fromisoformat(value) if value else None

    return Entry(
        record_id=record_id, memory_id=memory_id, slug=slug, type=rtype, version=version,
        written_by=Writer(kind=w["kind"], id=w["id"], type=w.get("type"), on_behalf_of=w.get("on_behalf_of"),
                          consolidation_id=w.get("consolidation_id")),
        written_at=datetime.fromisoformat(env["written_at"]),
        valid_from=at(env["valid_from"]), valid_to=at(env["valid_to"]), titled=bool(env["titled"]),
        attributes=env["attributes"], references=tuple(Reference(m, r, rel) for m, r, rel in env["references"]),
        dangling=tuple(env.get("dangling", ())), write_id=env.get("write_id"), status=env.get("status", "active"),
    )


class Ledger:
    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db

    @classmethod
    async def open(cls, path: Path) -> Ledger:
        db = await aiosqlite.connect(path)
        # WAL with synchronous=NORMAL: a commit is not an fsync (one per checkpoint instead); what a crash of
        # the machine could lose is the last entries, whose records the plugin then holds in no memory.
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=NORMAL")
        await db.executescript(SCHEMA)
        await db.commit()
        return cls(db)

    async def get(self, record_id: str) -> Entry | None:
        async with self._db.execute("SELECT * FROM plugin_records WHERE record_id = ?", (record_id,)) as cur:
            row = await cur.fetchone()
        return _entry(row) if row else None

    async def by_slugs(self, slugs: Iterable[str]) -> dict[str, Entry]:
        """The entries of these plugin slugs (asked in chunks: SQLite bounds a statement's parameters)."""
        wanted = list(dict.fromkeys(slugs))
        found: dict[str, Entry] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            async with self._db.execute(f"SELECT * FROM plugin_records WHERE slug IN ({marks})", chunk) as cur:  # noqa: S608
                for row in await cur.fetchall():
                    entry = _entry(row)
                    found[entry.slug] = entry
        return found

    async def slugs_from(self, base: str) -> set[str]:
        """The slugs held that are `base` or `base-<suffix>`, so a new one skips them without asking."""
        pattern = base.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "-%"
        async with self._db.execute("SELECT slug FROM plugin_records WHERE slug = ? OR slug LIKE ? ESCAPE '\\'",
                                    (base, pattern)) as cur:
            return {row[0] for row in await cur.fetchall()}

    async def of_memory(self, memory_id: str) -> list[Entry]:
        async with self._db.execute("SELECT * FROM plugin_records WHERE memory_id = ?", (memory_id,)) as cur:
            return [_entry(row) for row in await cur.fetchall()]

    async def put(self, entry: Entry) -> None:
        await self._db.execute(
            "INSERT INTO plugin_records VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (record_id) DO UPDATE SET"
            " memory_id = excluded.memory_id, slug = excluded.slug, type = excluded.type,"
            " version = excluded.version, envelope = excluded.envelope",
            (entry.record_id, entry.memory_id, entry.slug, entry.type, entry.version, entry.envelope()),
        )
        await self._db.commit()

    async def drop(self, record_id: str) -> None:
        await self._db.execute("DELETE FROM plugin_records WHERE record_id = ?", (record_id,))
        await self._db.commit()

    async def close(self) -> None:
        await self._db.close()
