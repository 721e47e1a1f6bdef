"""Reading the decision log's journal back: the segments of its directory, and one batch of entries read
from a committed position, ready to chain and store.

The writing side (`AuditLog.record`, gateway/audit/log.py) appends MAC-tagged lines to the open segment; the
flusher reads them back from the committed position with `next_batch`, at start (what a crash left) and then
every interval. A line whose MAC does not hold is not stored but becomes a `audit.journal_rejected` note on
the chain; a line that cannot be parsed, or bytes without a newline in a segment no one writes any more,
become `audit.journal_unreadable` notes, so that what was lost is said where the log is read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.audit.chain import coverage_digest
from gateway.audit.journal import JournalKey
from gateway.audit.lines import item, marker

log = logging.getLogger("memfed.audit")

CHUNK = 1024 * 1024  # read at a time; a chunk always holds a whole line (lines.MAX_LINE)

# The entries to store (rows), the position after them (segment, offset), the coverage sets among them.
Batch = tuple[list[tuple[Any, ...]], tuple[int, int], dict[str, str]]


def segment_path(directory: Path, n: int) -> Path:
    return directory / f"{n:012d}.log"


def segments(directory: Path) -> list[int]:
    """The numbers of the journal's segments, oldest first."""
    return sorted(int(p.stem) for p in directory.glob("*.log") if p.stem.isdigit())


async def next_batch(directory: Path, key: JournalKey | None, position: tuple[int, int], *, current: int,
                     batch_size: int, rejected: Callable[[], None]) -> Batch | None:  # fmt: skip
    """Up to `batch_size` entries from `position` on, the position after them and the coverage sets
    journaled among them; None when caught up. `current` is the segment being written; `rejected` is
    called for each line whose MAC does not hold."""
    segment, offset = position
    try:
        with segment_path(directory, segment).open("rb") as f:
            f.seek(offset)
            data = f.read(CHUNK)
    except FileNotFoundError:
        data = b""
    closed = segment < current  # no one writes to it any more
    if (end := data.rfind(b"\n") + 1) == 0:
        if data and (closed or len(data) == CHUNK):  # a torn last line, or garbage without newlines
            note = f"{len(data)} unreadable bytes at offset {offset} of journal segment {segment}"
            return [marker("audit.journal_unreadable", note)], (segment, offset + len(data)), {}
        if not closed:
            return None
        later = [n for n in segments(directory) if n > segment]
        return [], (min(later) if later else current, 0), {}
    items: list[tuple[Any, ...]] = []
    sets: dict[str, str] = {}
    at = 0
    lines = 0
    while at < end and len(items) < batch_size:
        lines += 1
        if lines % 250 == 0:
            await asyncio.sleep(0)  # parsing a second's worth of lines: let requests through meanwhile
        nl = data.index(b"\n", at)
        tagged, start, at = data[at:nl], offset + at, nl + 1
        if not tagged:
            continue  # an empty line says nothing (this process starts one after bytes someone else wrote)
        if key is None or (raw := key.text(segment, start, tagged)) is None:
            rejected()
            items.append(_rejected(segment, start, len(tagged)))
            continue
        try:
            if raw[:1] == b"C":
                digest, body = raw[1:].decode("utf-8", "surrogatepass").split("\x1f", 1)
                if coverage_digest(body) != digest:
                    raise ValueError("a coverage set does not match its digest")
                sets[digest] = body
            elif raw.strip():
                items.append(item(raw))
        except Exception as exc:
            note = f"journal line at offset {start} of segment {segment} unreadable ({exc!r}); decision lost"
            items.append(marker("audit.journal_unreadable", note))
    return items, (segment, offset + at), sets


def _rejected(segment: int, start: int, size: int) -> tuple[Any, ...]:
    note = (f"a line of {size} bytes at offset {start} of journal segment {segment} was not written by this "
            "gateway (its MAC does not hold): not stored")  # fmt: skip
    log.warning("audit: %s", note)
    return marker("audit.journal_rejected", note)
