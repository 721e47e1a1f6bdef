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
from gateway.base.config import ConfigError, from_mapping
from gateway.cli import main

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
    digest = chain_hash(entry)
    entry["hash"] = digest
    sealed = {**entry, "seal": seal.entry(digest)}
    assert verify_lines([canonical_json(sealed)], seal).ok
    assert not verify_lines([canonical_json({**sealed, "seal": "0" * 64})], seal).ok


# --------------------------------------------------------------------------- stripped, emptied, cut, rolled back


async def _strip_seals(engine: AsyncEngine, genesis: str) -> None:
    """Set every seal the database holds to NULL; the record that sealing began is nulled, deleted or kept."""
    from gateway.audit import store as audit_store

    async with engine.begin() as conn:
        await conn.execute(sa.update(entries_table).values(seal=None))
        await conn.execute(sa.update(head_table).values(seal=None))
        table = getattr(audit_store, "genesis_table", None)
        if table is not None and genesis == "null":
            await conn.execute(sa.update(table).values(seal=None))
        elif table is not None and genesis == "delete":
            await conn.execute(sa.delete(table))


async def _empty(engine: AsyncEngine, genesis: str) -> None:
    from gateway.audit import store as audit_store

    async with engine.begin() as conn:
        await conn.execute(sa.delete(entries_table))
        await conn.execute(sa.delete(head_table))
        table = getattr(audit_store, "genesis_table", None)
        if table is not None and genesis == "delete":
            await conn.execute(sa.delete(table))


def _forget_local_anchor(tmp_path: Path) -> None:
    """What an attacker who can also write the data directory would add: the gateway's own note of how
    far the log reached goes too."""
    (tmp_path / "data" / "audit-journal" / "anchor").unlink(missing_ok=True)


@pytest.mark.parametrize("genesis", ["null", "delete"])
async def test_seals_stripped_after_a_rewrite_never_verify_as_intact(engine: AsyncEngine, tmp_path: Path,
                                                                     genesis: str) -> None:  # fmt: skip
    """Rewriting entries, recomputing the plain hashes and setting every seal to NULL is a break."""
    log = await _sealed_log(engine, tmp_path)
    await log.close()
    await _rewrite_from(engine, 4)
    await _strip_seals(engine, genesis)
    report = await AuditLog(engine, tmp_path / "data", seal=Seal(KEY)).verify()
    assert not report.ok, report
    assert "seal" in (report.problem or "")


@pytest.mark.parametrize("genesis", ["keep", "delete"])
async def test_an_emptied_sealed_log_is_a_break(engine: AsyncEngine, tmp_path: Path, genesis: str) -> None:
    """Deleting every entry and the head (and the record that sealing began) never verifies as intact."""
    log = await _sealed_log(engine, tmp_path)
    await log.close()
    await _empty(engine, genesis)
    report = await AuditLog(engine, tmp_path / "data", seal=Seal(KEY)).verify()
    assert not report.ok, report
    assert report.checked == 0


async def test_a_shortened_sealed_log_without_its_head_is_a_break(engine: AsyncEngine, tmp_path: Path) -> None:
    """The last entries and the head deleted: verify names the missing head."""
    log = await _sealed_log(engine, tmp_path)
    await log.close()
    async with engine.begin() as conn:
        await conn.execute(sa.delete(entries_table).where(entries_table.c.seq > 5))
        await conn.execute(sa.delete(head_table))
    report = await AuditLog(engine, tmp_path / "data", seal=Seal(KEY)).verify()
    assert not report.ok and "head" in (report.problem or ""), report


@pytest.mark.parametrize("local_anchor", ["kept", "removed"])
async def test_a_gateway_started_on_a_rewritten_log_does_not_seal_on_top(engine: AsyncEngine, tmp_path: Path,
                                                                         local_anchor: str) -> None:  # fmt: skip
    """A start on a rewritten, stripped log refuses, and the log still does not verify."""
    log = await _sealed_log(engine, tmp_path)
    await log.close()
    await _rewrite_from(engine, 4)
    await _strip_seals(engine, "delete")
    if local_anchor == "removed":
        _forget_local_anchor(tmp_path)
    again = AuditLog(engine, tmp_path / "data", flush_interval=60, seal=Seal(KEY))
    with pytest.raises(RuntimeError, match=r"was rewritten|none of them sealed"):
        await again.start()
        again.decide(DecisionEntry("req_after", "member:ann", (), "memories.get", "hmem_a", "read", True, "x"))
        await again.close()
    assert not (await AuditLog(engine, tmp_path / "data", seal=Seal(KEY)).verify()).ok
    async with engine.connect() as conn:
        after = (await conn.execute(sa.select(entries_table.c.seq).where(entries_table.c.request_id == "req_after")))
        assert after.first() is None


async def test_a_gateway_started_on_an_emptied_log_refuses(engine: AsyncEngine, tmp_path: Path) -> None:
    """Every entry, the head and the record that sealing began deleted: the gateway that wrote them knows."""
    log = await _sealed_log(engine, tmp_path)
    await log.close()
    await _empty(engine, "delete")
    with pytest.raises(RuntimeError, match=r"cut, emptied or put back"):
        again = AuditLog(engine, tmp_path / "data", flush_interval=60, seal=Seal(KEY))
        await again.start()
        await again.close()


# --------------------------------------------------------------------------- anchors, and sealing on purpose


def _cli_config(tmp_path: Path, db: Path) -> list[str]:
    toml = tmp_path / "memfed.toml"
    toml.write_text(f'[state]\nurl = "sqlite:///{db}"\n\n[audit]\nseal_key_env = "MEMFED_TEST_SEAL"\n')
    return ["--config", str(toml), "--data-dir", str(tmp_path / "data")]


def _decide(log: AuditLog, first: int, n: int) -> None:
    for i in range(first, first + n):
        log.decide(DecisionEntry(f"req_{i}", "member:ann", (), "memories.get", "hmem_a", "read", True,
                                 f"grant {i}", BASE + timedelta(seconds=i)))


async def test_an_anchor_kept_outside_shows_a_log_put_back_to_an_earlier_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """A whole database put back to an earlier state of its own verifies, seals and all; against an anchor
    taken later it does not, and the gateway that wrote the later entries refuses to start on it."""
    import asyncio
    import shutil

    from sqlalchemy.ext.asyncio import create_async_engine

    monkeypatch.setenv("MEMFED_TEST_SEAL", KEY.decode())
    db = tmp_path / "state.sqlite3"
    args = _cli_config(tmp_path, db)
    engine = create_async_engine(f"sqlite+aiosqlite:///{db}")
    log = AuditLog(engine, tmp_path / "data", flush_interval=60, seal=Seal(KEY))
    await log.start()
    _decide(log, 0, 5)
    await log.flush()
    await log.close()
    await engine.dispose()
    shutil.copy(db, tmp_path / "earlier.sqlite3")  # the copy an attacker keeps (or an old backup)
    engine = create_async_engine(f"sqlite+aiosqlite:///{db}")
    log = AuditLog(engine, tmp_path / "data", flush_interval=60, seal=Seal(KEY))
    await log.start()
    _decide(log, 5, 4)
    await log.flush()
    await log.close()
    await engine.dispose()
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["audit", "anchor", *args]) == 0
    anchor = capsys.readouterr().out.strip()
    assert anchor.startswith("10:") and len(anchor) == 3 + 64  # the genesis entry and nine decisions
    assert await asyncio.to_thread(main, ["audit", "verify", "--anchor", anchor, *args]) == 0
    shutil.copy(tmp_path / "earlier.sqlite3", db)
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["audit", "verify", *args]) == 0  # what no record inside can show
    assert await asyncio.to_thread(main, ["audit", "verify", "--anchor", anchor, *args]) == 1
    assert "BROKEN at entry 7: entries 7..10: missing, which the anchor recorded" in capsys.readouterr().out
    engine = create_async_engine(f"sqlite+aiosqlite:///{db}")
    try:
        with pytest.raises(RuntimeError, match="short of entry 10"):
            await AuditLog(engine, tmp_path / "data", flush_interval=60, seal=Seal(KEY)).start()
    finally:
        await engine.dispose()
    assert await asyncio.to_thread(main, ["audit", "verify", "--anchor", "ten:abc", *args]) == 2


async def test_an_unsealed_log_is_sealed_only_on_purpose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Given a seal key, a gateway will not silently seal a log of unsealed entries (it could be one whose
    seals were stripped); `memfed audit seal` does, and from then on the log verifies as sealed from there."""
    import asyncio

    from sqlalchemy.ext.asyncio import create_async_engine

    monkeypatch.setenv("MEMFED_TEST_SEAL", KEY.decode())
    db = tmp_path / "state.sqlite3"
    engine = create_async_engine(f"sqlite+aiosqlite:///{db}")
    try:
        plain = AuditLog(engine, tmp_path / "data", flush_interval=60)
        await plain.start()
        _decide(plain, 0, 3)
        await plain.close()
        with pytest.raises(RuntimeError, match="memfed audit seal"):
            await AuditLog(engine, tmp_path / "data", flush_interval=60, seal=Seal(KEY)).start()
        assert await asyncio.to_thread(main, ["audit", "seal", *_cli_config(tmp_path, db)]) == 0
        sealed = AuditLog(engine, tmp_path / "data", flush_interval=60, seal=Seal(KEY))
        await sealed.start()
        _decide(sealed, 3, 2)
        await sealed.close()
        report = await sealed.verify()
        assert report.ok and report.sealed_from == 4 and report.checked == 6, report
        with pytest.raises(RuntimeError, match="seal key"):  # sealed now: no unsealed writer on top
            await AuditLog(engine, tmp_path / "data", flush_interval=60).start()
        async with engine.begin() as conn:  # the sealed part loses a seal: found, at that entry
            await conn.execute(sa.update(entries_table).where(entries_table.c.seq == 5).values(seal=None))
        report = await sealed.verify()
        assert not report.ok and report.broken_at == 5 and "lost its seal" in (report.problem or "")
    finally:
        await engine.dispose()


async def test_a_log_sealed_before_the_genesis_record_is_carried_over(engine: AsyncEngine, tmp_path: Path) -> None:
    """A log an earlier version sealed (entries and head sealed, no genesis record) starts, gains the record
    at its first sealed entry, and verifies."""
    from gateway.audit import store as audit_store

    log = await _sealed_log(engine, tmp_path)
    await log.close()
    async with engine.begin() as conn:  # what that version left: no genesis record, no local note
        await conn.execute(sa.delete(audit_store.genesis_table))
        await conn.execute(sa.update(entries_table).where(entries_table.c.seq == 1).values(seal=None))
    _forget_local_anchor(tmp_path)
    again = AuditLog(engine, tmp_path / "data", flush_interval=60, seal=Seal(KEY))
    await again.start()
    await again.close()
    report = await again.verify()
    assert report.ok and report.sealed_from == 2, report


async def test_a_running_gateway_does_not_seal_on_top_of_a_log_rewritten_under_it(engine: AsyncEngine,
                                                                                  tmp_path: Path) -> None:  # fmt: skip
    """A rewrite while the gateway serves (head moved without the seal) stops the flusher from committing:
    the new decisions wait in the journal; nothing is chained, let alone sealed, onto the rewrite."""
    from gateway.audit.seal import AuditLogRefused

    log = await _sealed_log(engine, tmp_path)
    await _rewrite_from(engine, 4)
    await _strip_seals(engine, "keep")
    _decide(log, 100, 2)
    with pytest.raises(AuditLogRefused, match="without this log's seal"):
        await log.flush()
    async with engine.connect() as conn:
        stored = (await conn.execute(sa.select(sa.func.count()).select_from(entries_table))).scalar()
    assert stored == 9
    assert any((tmp_path / "data" / "audit-journal").glob("*.log"))
    await log.close()  # its final flush is refused too, and said so in the log
