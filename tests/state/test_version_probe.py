"""The coherence probe: shared answers never older than the caller, cancellation never breaks it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.state import coherence
from gateway.state.store import StateStore
from gateway.state.version_probe import VersionProbe
from tests._postgres import PG_URL, fresh_schema


class ScriptedProbe(VersionProbe):
    """A probe whose database answers are released by the test, one per `release()`."""

    def __init__(self) -> None:
        super().__init__(engine=None)  # type: ignore[arg-type]  # never reaches a database
        self.asked = 0
        self.gates: list[asyncio.Event] = []
        self.fail_next = False

    async def _ask(self) -> int:
        self.asked += 1
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("the database went away")
        return self.asked

    async def release(self) -> None:
        while not self.gates or self.gates[-1].is_set():
            await asyncio.sleep(0)
        self.gates[-1].set()
        await asyncio.sleep(0)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_caller_arriving_while_a_probe_runs_waits_for_the_next_probe() -> None:
    """The probe in flight may have read the database before the caller's change committed, so only
    callers that were there before it started take its answer; later ones share the next one."""
    probe = ScriptedProbe()
    first = asyncio.create_task(probe.newest())
    await settle()
    later = [asyncio.create_task(probe.newest()) for _ in range(3)]
    await settle()
    await probe.release()
    assert await first == 1
    await settle()
    assert not any(task.done() for task in later)  # not answered by the probe that was in flight
    await probe.release()
    assert [await task for task in later] == [2, 2, 2]
    assert probe.asked == 2  # three callers, one round trip


async def test_a_cancelled_caller_does_not_cancel_the_probe_others_wait_on() -> None:
    """A request cut off by its timeout leaves the statement running to its end for the others."""
    probe = ScriptedProbe()
    impatient = asyncio.create_task(probe.newest())
    await settle()
    patient_first = asyncio.create_task(probe.newest())
    await settle()
    impatient.cancel()
    await probe.release()
    with pytest.raises(asyncio.CancelledError):
        await impatient
    await probe.release()
    assert await patient_first == 2
    assert probe.asked == 2


async def test_a_failed_probe_fails_its_callers_and_the_next_call_asks_again() -> None:
    probe = ScriptedProbe()
    probe.fail_next = True
    failing = asyncio.create_task(probe.newest())
    await probe.release()
    with pytest.raises(ConnectionError):
        await failing
    retry = asyncio.create_task(probe.newest())
    await probe.release()
    assert await retry == 2


async def test_a_closed_probe_refuses_callers_queued_behind_the_last_probe() -> None:
    probe = ScriptedProbe()
    running = asyncio.create_task(probe.newest())
    await settle()
    queued = asyncio.create_task(probe.newest())
    await settle()
    closing = asyncio.create_task(probe.close())
    await settle()
    await probe.release()
    assert await running == 1
    with pytest.raises(RuntimeError, match="closed"):
        await queued
    await closing


@pytest.mark.postgres
async def test_the_probe_sees_every_change_committed_before_it_was_asked_on_postgres() -> None:
    """Through its own prepared statement on PostgreSQL, between and after callers cancelled mid-query."""
    async with fresh_schema("probe") as (_engine, schema):
        store = await StateStore.open(PG_URL, search_path=schema)
        try:
            for round_ in range(20):
                async with store.engine.begin() as conn:
                    await coherence.record(conn, "member", [f"m{round_}"])
                    async with store.engine.connect() as other:
                        before = await coherence.latest(other)
                async with store.engine.connect() as conn:
                    expected = await coherence.latest(conn)
                assert expected > before
                hurried = asyncio.create_task(store.version_probe.newest())
                await asyncio.sleep(0)
                hurried.cancel()  # cut off while its statement may be on the wire
                assert await store.version_probe.newest() == expected
        finally:
            await store.close()


async def test_the_probe_reads_the_newest_change_on_sqlite(tmp_path: Path) -> None:
    store = await StateStore.open(f"sqlite+aiosqlite:///{tmp_path}/state.sqlite3")
    try:
        async with store.engine.begin() as conn:
            await coherence.record(conn, "member", ["m1", "m2"])
        async with store.engine.connect() as conn:
            assert await store.version_probe.newest() == await coherence.latest(conn)
    finally:
        await store.close()
