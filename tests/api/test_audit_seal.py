"""The decision log's seal: a chain rewritten by someone who can write the database, but does not hold
the key, is found, at the first entry rewritten."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.audit import AuditLog, DecisionEntry
from gateway.audit.chain import chain_hash
from gateway.audit.seal import Seal, SealKeyMissing
from gateway.audit.store import entries_table, head_table, link
from gateway.cli import main
from gateway.config import ConfigError, from_mapping

KEY = b"a-seal-key-of-32-bytes-for-tests"
BASE = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


async def _sealed_log(engine: AsyncEngine, tmp_path: Path, n: int = 8) -> AuditLog:
    log = AuditLog(engine, tmp_path / "data", flush_interval=60, seal=Seal(KEY))
    await log.start()
    for i in range(n):
        log.decide(DecisionEntry(f"req_{i}", "member:ann", (), "memories.get", "hmem_a", "read", True,
                                 f"grant {i}", BASE + timedelta(seconds=i)))
    await log.flush()
    return log


async def _rewrite_from(engine: AsyncEngine, seq: int) -> None:
    """What someone with write access to the database but not the key can do: edit entry `seq` and rehash
    it and every entry after it, and the head, so the plain chain verifies again."""
    async with engine.begin() as conn:
        rows = [link(r) for r in await conn.execute(sa.select(entries_table).order_by(entries_table.c.seq))]
        prev = rows[seq - 2]["hash"] if seq > 1 else "0" * 64
        for entry in rows[seq - 1 :]:
            entry = {**entry, "prev_hash": prev}
            if entry["seq"] == seq:
                entry["decision"] = "deny"
            entry["hash"] = chain_hash(entry)
            await conn.execute(sa.update(entries_table).where(entries_table.c.seq == entry["seq"]).values(
                decision=entry["decision"], prev_hash=entry["prev_hash"], hash=entry["hash"]))
            prev = entry["hash"]
        await conn.execute(sa.update(head_table).values(hash=prev))


async def test_a_sealed_log_verifies(engine: AsyncEngine, tmp_path: Path) -> None:
    log = await _sealed_log(engine, tmp_path)
    assert (await log.verify()).ok
    await log.close()


async def test_a_rehashed_rewrite_passes_the_chain_but_not_the_seal(engine: AsyncEngine, tmp_path: Path) -> None:
    log = await _sealed_log(engine, tmp_path)
    await log.close()
    await _rewrite_from(engine, 4)
    unsealed = AuditLog(engine, tmp_path / "data")
    assert (await unsealed.verify()).ok  # the plain chain cannot tell: this is why the seal exists
    report = await AuditLog(engine, tmp_path / "data", seal=Seal(KEY)).verify()
    assert not report.ok and report.broken_at == 4 and "seal" in (report.problem or "")
    wrong_key = await AuditLog(engine, tmp_path / "data", seal=Seal(b"another-key-of-enough-bytes")).verify()
    assert not wrong_key.ok and wrong_key.broken_at == 1


@pytest.mark.parametrize("damage", ["lost seal", "cut end"])
async def test_a_dropped_seal_or_a_cut_end_is_found(engine: AsyncEngine, tmp_path: Path, damage: str) -> None:
    log = await _sealed_log(engine, tmp_path)
    await log.close()
    async with engine.begin() as conn:
        if damage == "lost seal":
            await conn.execute(sa.update(entries_table).where(entries_table.c.seq == 6).values(seal=None))
        else:  # the last three entries removed and the head moved back onto the fifth
            fifth = (await conn.execute(sa.select(entries_table.c.hash).where(entries_table.c.seq == 5))).scalar()
            await conn.execute(sa.delete(entries_table).where(entries_table.c.seq > 5))
            await conn.execute(sa.update(head_table).values(seq=5, hash=fifth))
    report = await AuditLog(engine, tmp_path / "data", seal=Seal(KEY)).verify()
    assert not report.ok
    assert ("lost its seal" if damage == "lost seal" else "head does not carry") in (report.problem or "")


def test_the_key_comes_from_the_environment_and_never_shows(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:  # fmt: skip
    config = from_mapping({"audit": {"seal_key_env": "MEMFED_TEST_SEAL"}})
    monkeypatch.delenv("MEMFED_TEST_SEAL", raising=False)
    with pytest.raises(SealKeyMissing):
        Seal.from_env(config.audit_seal_env)
    monkeypatch.setenv("MEMFED_TEST_SEAL", KEY.decode())
    seal = Seal.from_env(config.audit_seal_env)
    assert seal is not None and KEY.decode() not in repr(seal)
    with pytest.raises(ConfigError):
        from_mapping({"audit": {"seal_key_env": "not a variable name"}})
    with pytest.raises(ValueError):
        Seal(b"short")
    toml = tmp_path / "memfed.toml"
    toml.write_text('[audit]\nseal_key_env = "MEMFED_TEST_SEAL"\n')
    monkeypatch.delenv("MEMFED_TEST_SEAL")
    assert main(["audit", "verify", "--config", str(toml), "--data-dir", str(tmp_path / "d")]) == 2


def test_an_export_checks_its_seals_with_the_key() -> None:
    from gateway.audit.chain import verify_lines
    from gateway.audit.store import canonical_json

    seal = Seal(KEY)
    entry = {"seq": 1, "at": "2026-11-30T12:00:00.000Z", "request_id": "r", "principal": "member:a", "groups": [],
             "operation": "x", "memory_id": None, "privilege": None, "decision": "allow", "reason": "y",
             "prev_hash": "0" * 64}
    entry["hash"] = chain_hash(entry)
    sealed = {**entry, "seal": seal.entry(entry["hash"])}
    assert verify_lines([canonical_json(sealed)], seal).ok
    assert not verify_lines([canonical_json({**sealed, "seal": "0" * 64})], seal).ok
