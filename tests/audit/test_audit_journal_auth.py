"""The journal cannot be written into: a line the gateway did not write is rejected, reported, never sealed."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.audit import AuditLog, AuditQuery, DecisionEntry
from gateway.audit import lines as audit_lines
from gateway.audit.seal import Seal
from gateway.audit.store import entries_table

KEY = b"a-seal-key-of-32-bytes-for-tests"


def _decision(request_id: str) -> DecisionEntry:
    return DecisionEntry(request_id, "member:ann", (), "memories.get", "hmem_a", "read", True, "grant hgrt_1")


@pytest.fixture(params=["sealed", "unsealed"])
async def log(request: pytest.FixtureRequest, engine: AsyncEngine, tmp_path: Path) -> AsyncIterator[AuditLog]:
    made = AuditLog(engine, tmp_path / "data", flush_interval=60,
                    seal=Seal(KEY) if request.param == "sealed" else None)
    await made.start()
    yield made
    await made.close()


def _segment(tmp_path: Path) -> Path:
    return max((tmp_path / "data" / "audit-journal").glob("*.log"))


async def _stored(log: AuditLog) -> list[dict[str, Any]]:
    rows, _ = await log.query(AuditQuery(), None, 1000)
    return rows


async def test_a_line_appended_by_someone_else_is_rejected_and_reported(log: AuditLog, tmp_path: Path) -> None:
    """A well-formed decision appended to the current journal file is not stored; a marker says a line was
    rejected; the gateway's own decisions before and after it are stored; the log verifies."""
    log.decide(_decision("req_before"))
    with _segment(tmp_path).open("ab") as journal:
        journal.write(audit_lines.line(_decision("req_forged")))
        journal.write(audit_lines.encoded(_decision("req_forged_json"))[:-1] + b"\x1d" + b"0" * 32 + b"\n")
    log.decide(_decision("req_after"))
    await log.flush()
    rows = await _stored(log)
    ids = [r["request_id"] for r in rows]
    assert "req_forged" not in ids and "req_forged_json" not in ids
    assert ids.index("req_before") < ids.index("req_after")
    rejected = [r for r in rows if r["operation"] == "audit.journal_rejected"]
    assert len(rejected) == 2 and all("not written by this gateway" in r["reason"] for r in rejected)
    assert log.stats()["rejected"] == 2
    assert (await log.verify()).ok


async def test_a_copy_of_a_genuine_line_is_rejected(log: AuditLog, tmp_path: Path) -> None:
    """Replaying a line the gateway wrote (copied to the end of the journal) does not store it twice."""
    log.decide(_decision("req_once"))
    segment = _segment(tmp_path)
    genuine = segment.read_bytes().splitlines(keepends=True)[-1]
    with segment.open("ab") as journal:
        journal.write(genuine)
    await log.flush()
    rows = await _stored(log)
    assert [r["request_id"] for r in rows].count("req_once") == 1
    assert [r["operation"] for r in rows].count("audit.journal_rejected") == 1


async def test_lines_left_in_the_journal_are_checked_at_the_next_start(engine: AsyncEngine, tmp_path: Path) -> None:
    """Lines waiting in the journal across a restart are stored if the gateway wrote them, rejected if not."""
    first = AuditLog(engine, tmp_path / "data", flush_interval=60, seal=Seal(KEY))
    await first.start()
    first.decide(_decision("req_waiting"))
    segment = _segment(tmp_path)
    first._release()  # stop as a kill would: nothing flushed
    with segment.open("ab") as journal:
        journal.write(audit_lines.line(_decision("req_forged")))
    again = AuditLog(engine, tmp_path / "data", flush_interval=60, seal=Seal(KEY))
    await again.start()
    try:
        ids = [r["request_id"] for r in await _stored(again)]
        assert "req_waiting" in ids and "req_forged" not in ids
        async with engine.connect() as conn:
            operations = (await conn.execute(sa.select(entries_table.c.operation))).scalars().all()
        assert "audit.journal_rejected" in operations
        assert (await again.verify()).ok
    finally:
        await again.close()


async def test_without_a_seal_key_the_journal_key_is_private_to_the_gateway(engine: AsyncEngine,
                                                                            tmp_path: Path) -> None:  # fmt: skip
    """Unsealed, the journal's key is a file only the gateway's user can read; sealed, no key file is kept
    (the key is derived from the seal key, which never touches the disk)."""
    unsealed = AuditLog(engine, tmp_path / "plain", flush_interval=60)
    await unsealed.start()
    await unsealed.close()
    key_file = tmp_path / "plain" / "audit-journal" / "journal-key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    sealed = AuditLog(engine, tmp_path / "sealed", flush_interval=60, seal=Seal(KEY))
    await sealed.start()
    await sealed.close()
    assert not (tmp_path / "sealed" / "audit-journal" / "journal-key").exists()
