"""The server's file store (`POST /v1/files`): bytes on disk, their description in the state store.

A record's file part names a file by id; the part's `name`, `media_type` and `bytes` are completed from
here and a client's values are not read. Bytes are read back through the record that names them, by
whoever may read that record, and go only when no record anywhere names them (gateway.state.file_uses).

A file id that reaches the store from elsewhere (a provider keeps the parts it is given, and hands back
whatever its copy now says) is checked against the id format before it touches the disk: anything else
names no file. Bytes are written 0600 in a 0700 directory.
"""

from __future__ import annotations

import asyncio
import mimetypes
import re
import secrets
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from adapters.base import Part
from gateway.base.clock import now_ms
from gateway.base.errors import ApiError, file_not_found
from gateway.base.ids import new_id
from gateway.state import file_uses
from gateway.state import schema as t
from gateway.state.file_uses import FileGone
from gateway.state.private_files import private_dir, write_new_private
from gateway.state.store import StateStore

__all__ = ["FileGone", "FileStore", "StoredFile", "valid_file_id"]

_FILE_ID = re.compile(r"file_[0-9a-f]{32}")
W = TypeVar("W")


def valid_file_id(file_id: object) -> bool:
    """Whether `file_id` has the form this store mints (`file_` and 32 lowercase hex digits)."""
    return isinstance(file_id, str) and _FILE_ID.fullmatch(file_id) is not None


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
        self.root = private_dir(root)

    def _path(self, file_id: str) -> Path | None:
        return self.root / file_id if valid_file_id(file_id) else None

    async def save(self, owner: str, filename: str, media_type: str | None, data: bytes, purpose: str) -> StoredFile:
        media = media_type or mimetypes.guess_type(filename)[0] or "application/octet-stream"
        stored = StoredFile(new_id("file"), owner, filename, media, len(data), purpose, now_ms())
        await asyncio.to_thread(write_new_private, self.root / stored.id, data)
        await self.store.rows.insert(t.files, id=stored.id, owner=owner, filename=filename, media_type=media,
                                bytes=len(data), purpose=purpose, created_at=stored.created_at)
        return stored

    async def get(self, file_id: str) -> StoredFile | None:
        if not valid_file_id(file_id):
            return None
        row = await self.store.rows.fetch_one(t.files, id=file_id)
        if row is None:
            return None
        return StoredFile(row.id, row.owner, row.filename, row.media_type, row.bytes, row.purpose, row.created_at)

    async def read(self, file_id: str) -> bytes | None:
        path = self._path(file_id)
        if path is None:
            return None
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            return None

    async def remove(self, file_id: str) -> None:
        """The file goes, whoever names it (the erase path uses `release`)."""
        path = self._path(file_id)
        if path is None:
            return
        await asyncio.to_thread(path.unlink, missing_ok=True)
        await self.store.rows.delete_rows(t.files, id=file_id)

    async def naming(self, memory_id: str, parts: Iterable[Part], write: Callable[[], Awaitable[W]]) -> W:
        """Run `write`, which makes or revises a record of `memory_id` whose content is `parts`, with the
        files they name held for it: an erasure meanwhile cannot take their bytes, and afterwards the
        record counts among those naming them. FileGone if one went before the write could start."""
        named = {p.file.id for p in parts if p.file is not None and valid_file_id(p.file.id)}
        if not named:
            return await write()
        token = await self.pin(memory_id, named)
        try:
            written = await write()
        except Exception as exc:
            if _surely_not_written(exc):
                await file_uses.unpin(self.store.engine, memory_id, token)
            raise  # otherwise the provider may have kept it: the pin keeps the bytes
        await file_uses.settle(self.store.engine, memory_id, token, str(getattr(written, "id", "")), named)
        return written

    async def pin(self, memory_id: str, file_ids: Iterable[str], token: str | None = None) -> str:
        """Hold files for writes into `memory_id` that will name them: a token for `unpin` (`token`, or a
        new one). 404 when one is no longer stored."""
        token = token or secrets.token_hex(16)
        named = {f for f in file_ids if valid_file_id(f)}
        if named:
            try:
                await file_uses.pin(self.store.engine, memory_id, named, token)
            except FileGone as gone:
                raise file_not_found("content", f"No such file: {gone.file_id}.") from None
        return token

    async def attach(self, memory_id: str, record_id: str, file_ids: Iterable[str]) -> None:
        """`record_id` of `memory_id` names `file_ids` now (written under a pin)."""
        named = [f for f in file_ids if valid_file_id(f)]
        if named:
            await file_uses.settle(self.store.engine, memory_id, None, record_id, named)

    async def unpin(self, memory_id: str, token: str) -> None:
        """The writes a pin held files for are over: every record among them has been attached."""
        await file_uses.unpin(self.store.engine, memory_id, token)

    async def release(self, memory_id: str, erased: Iterable[str], file_ids: Iterable[str]) -> list[str]:
        """The records `erased` of `memory_id` are gone: the bytes of those of `file_ids` that no record
        anywhere names any more go too. Returns the files removed."""
        named = [f for f in file_ids if valid_file_id(f)]
        gone = await file_uses.release(self.store.engine, memory_id, erased, named)
        for file_id in gone:
            path = self._path(file_id)
            if path is not None:
                await asyncio.to_thread(path.unlink, missing_ok=True)
        return gone


def _surely_not_written(exc: Exception) -> bool:
    """A refusal before or by the provider, as opposed to a timeout or an outage after which the write may
    have been kept all the same."""
    return isinstance(exc, ApiError) and exc.status < 500
