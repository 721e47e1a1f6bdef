"""The server's file store (`POST /v1/files`): bytes on disk, their description in the state store.

A record's file part names a file by id; the part's `name`, `media_type` and `bytes` are completed from
here and a client's values are not read. Bytes are read back through the record that names them, by
whoever may read that record.
"""

from __future__ import annotations

import asyncio
import mimetypes
from dataclasses import dataclass
from pathlib import Path

from gateway.ids import new_id
from gateway.state import schema as t
from gateway.state.store import StateStore, now_ms


@dataclass(frozen=True)
class StoredFile:
    id: str
    owner: str
    filename: str
    media_type: str
    bytes: int
    purpose: str
    created_at: int

    def document(self) -> dict[str, object]:
        return {"id": self.id, "object": "file", "filename": self.filename, "bytes": self.bytes,
                "media_type": self.media_type, "purpose": self.purpose, "created_at": self.created_at // 1000}


class FileStore:
    def __init__(self, store: StateStore, root: Path) -> None:
        self.store = store
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, file_id: str) -> Path:
        return self.root / file_id

    async def save(self, owner: str, filename: str, media_type: str | None, data: bytes, purpose: str) -> StoredFile:
        media = media_type or mimetypes.guess_type(filename)[0] or "application/octet-stream"
        stored = StoredFile(new_id("file"), owner, filename, media, len(data), purpose, now_ms())
        await asyncio.to_thread(self._path(stored.id).write_bytes, data)
        await self.store.insert(t.files, id=stored.id, owner=owner, filename=filename, media_type=media,
                                bytes=len(data), purpose=purpose, created_at=stored.created_at)
        return stored

    async def get(self, file_id: str) -> StoredFile | None:
        row = await self.store.fetch_one(t.files, id=file_id)
        if row is None:
            return None
        return StoredFile(row.id, row.owner, row.filename, row.media_type, row.bytes, row.purpose, row.created_at)

    async def read(self, file_id: str) -> bytes | None:
        path = self._path(file_id)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            return None

    async def remove(self, file_id: str) -> None:
        await asyncio.to_thread(self._path(file_id).unlink, missing_ok=True)
        await self.store.delete_rows(t.files, id=file_id)
