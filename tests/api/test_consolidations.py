"""Consolidation runs over HTTP (§9.2) on the embedded provider: a real pass, its budget and resume, the
writer of what it writes, its changes, revert by appending, and memory_busy while it runs (§12)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from adapters.base import ProviderUnavailable
from tests.api._gateway import Gateway


class Paused:
    """The embedded provider, with each consolidation waiting for the test to let it go (and then
    failing with `fail`, when given): a run the test can watch while it runs, with no clock involved."""

    def __init__(self, inner: Any, fail: Exception | None = None) -> None:
        self._inner = inner
        self.fail = fail
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def consolidate(self, *args: Any, **kwargs: Any) -> Any:
        self.started.set()
        await self.release.wait()
        if self.fail is not None:
            raise self.fail
        return await self._inner.consolidate(*args, **kwargs)


def paused(gateway: Gateway, fail: Exception | None = None) -> Paused:
    handle = gateway.services.providers.handles["local"]
    wrapper = Paused(handle.provider, fail)
    handle.provider = wrapper
    return wrapper


async def remember(gateway: Gateway, memory: str, text: str, type_: str = "fact", **fields: Any) -> dict[str, Any]:
    made = await gateway.admin.post(f"/v1/memories/{memory}/records", json={"type": type_, "content": text, **fields})
    assert made.status_code == 201, made.text
    return made.json()


async def start(gateway: Gateway, memory: str, **body: Any) -> dict[str, Any]:
    answer = await gateway.admin.post(f"/v1/memories/{memory}/consolidations", json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()


async def active(gateway: Gateway, memory: str) -> set[str]:
    return {r["id"] for r in (await gateway.admin.get(f"/v1/memories/{memory}/records")).json()["data"]}


def instant(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def test_a_run_merges_duplicates_and_forgets_what_expired(gateway: Gateway) -> None:
    """One run on the embedded provider: the younger of two equal facts and a fact whose valid_to has
    passed are forgotten; the answer is the finished run in §9.2's shape."""
    memory = (await gateway.root("Notes"))["id"]
    kept = await remember(gateway, memory, "Acme renews in March.")
    twin = await remember(gateway, memory, "acme renews in MARCH")
    gone = await remember(gateway, memory, "The promo code is SPRING.", time={"valid_to": "2020-01-01T00:00:00Z"})
    other = await remember(gateway, memory, "Acme is based in Leeds.")

    run = await start(gateway, memory)

    assert run["id"].startswith("hcon_") and run["object"] == "memory.consolidation"
    assert (run["memory_id"], run["status"], run["trigger"], run["error"]) == (memory, "completed", "manual", "")
    assert run["changes"] == {"created": 0, "superseded": 0, "forgotten": 2}
    assert run["read"]["records"] == 4 and instant(run["read"]["through"]) >= instant(other["time"]["written_at"])
    assert run["budget"] == {"limit": None, "unit": "records", "exhausted": False}
    assert run["usage"]["input_tokens"] == 0 == run["usage"]["output_tokens"]
    assert run["written_by"] == {"kind": "provider", "id": "local"}
    assert isinstance(run["started_at"], int) and run["finished_at"] >= run["started_at"]
    assert await active(gateway, memory) == {kept["id"], other["id"]}
    for record in (twin, gone):
        got = (await gateway.admin.get(f"/v1/memories/{memory}/records/{record['id']}")).json()
        assert (got["status"], got["version"]) == ("forgotten", 2)


async def test_what_a_run_writes_carries_the_provider_and_the_run(gateway: Gateway) -> None:
    """Every version a run writes is written_by the provider with the run's id beside it."""
    memory = (await gateway.root("Notes"))["id"]
    await remember(gateway, memory, "Same.", attributes={"a": 1})
    twin = await remember(gateway, memory, "same", attributes={"b": 2})
    run = await start(gateway, memory)
    assert run["changes"] == {"created": 0, "superseded": 1, "forgotten": 1}

    changes = (await gateway.admin.get(f"/v1/memories/{memory}/consolidations/{run['id']}/changes")).json()["data"]
    assert [(c["kind"], c["version"], c["reverted"]) for c in changes] == [("superseded", 2, False),
                                                                          ("forgotten", 2, False)]
    assert changes[1]["record_id"] == twin["id"]
    for change in changes:
        got = (await gateway.admin.get(f"/v1/memories/{memory}/records/{change['record_id']}")).json()
        assert got["written_by"] == {"kind": "provider", "id": "local", "consolidation_id": run["id"]}


async def test_a_run_stops_at_its_budget_and_the_next_resumes_after_through(gateway: Gateway) -> None:
    """budget 2: the run reads the two oldest records, stops (stopped, exhausted) through the second's
    written_at; the next run resumes after it and finds the duplicate of a record the first one read."""
    memory = (await gateway.root("Notes"))["id"]
    first = await remember(gateway, memory, "One.")
    second = await remember(gateway, memory, "Two.")
    third = await remember(gateway, memory, "one")
    await remember(gateway, memory, "Four.")

    stopped = await start(gateway, memory, budget=2)
    assert (stopped["status"], stopped["budget"]) == ("stopped", {"limit": 2, "unit": "records", "exhausted": True})
    assert stopped["read"]["records"] == 2
    through = instant(stopped["read"]["through"])
    assert through.replace(microsecond=through.microsecond // 1000 * 1000) == instant(second["time"]["written_at"])

    resumed = await start(gateway, memory, budget=2)
    assert resumed["x.memfed"]["resumed_after"] == stopped["read"]["through"]
    assert (resumed["status"], resumed["read"]["records"], resumed["budget"]["exhausted"]) == ("completed", 2, False)
    assert third["id"] not in await active(gateway, memory) and first["id"] in await active(gateway, memory)

    fresh = await start(gateway, memory)
    assert fresh["x.memfed"]["resumed_after"] is None, "after a completed run the next reads from the start"


async def test_runs_are_listed_newest_first_and_read_one_by_one(gateway: Gateway) -> None:
    """The listing pages newest first; one run and its changes are read by id; another memory's run,
    or no run, is not found through this memory."""
    memory = (await gateway.root("Notes"))["id"]
    elsewhere = (await gateway.root("Other"))["id"]
    runs = [await start(gateway, memory) for _ in range(3)]
    foreign = await start(gateway, elsewhere)

    page = (await gateway.admin.get(f"/v1/memories/{memory}/consolidations", params={"limit": 2})).json()
    rest = (await gateway.admin.get(f"/v1/memories/{memory}/consolidations",
                                    params={"limit": 2, "cursor": page["next"]})).json()
    assert [r["id"] for r in page["data"] + rest["data"]] == [r["id"] for r in reversed(runs)]
    assert rest["next"] is None
    assert (await gateway.admin.get(f"/v1/memories/{memory}/consolidations/{runs[0]['id']}")).json() == runs[0]
    for path in (f"/v1/memories/{memory}/consolidations/{foreign['id']}",
                 f"/v1/memories/{memory}/consolidations/hcon_{'0' * 32}/changes"):
        answer = await gateway.admin.get(path)
        assert (answer.status_code, answer.json()["error"]["code"]) == (404, "memfed_consolidation_not_found")


async def test_revert_appends_and_history_keeps_both(gateway: Gateway) -> None:
    """Revert is a run of its own: what the run forgot or superseded is current again as a new version
    stamped with the revert's id; the run's changes are marked reverted; a second revert is refused; and
    the next run leaves what the revert brought back."""
    memory = (await gateway.root("Notes"))["id"]
    kept = await remember(gateway, memory, "Shared.", attributes={"a": 1})
    twin = await remember(gateway, memory, "shared", attributes={"b": 2})
    run = await start(gateway, memory)

    answer = await gateway.admin.post(f"/v1/memories/{memory}/consolidations/{run['id']}/revert")
    assert answer.status_code == 201, answer.text
    reversal = answer.json()
    assert reversal["status"] == "completed" and reversal["x.memfed"]["reverts"] == run["id"]
    assert reversal["changes"] == {"created": 0, "superseded": 2, "forgotten": 0}
    assert await active(gateway, memory) == {kept["id"], twin["id"]}
    versions = (await gateway.admin.get(f"/v1/memories/{memory}/records/{twin['id']}/history")).json()["data"]
    assert [(v["status"], v["written_by"].get("consolidation_id")) for v in versions] == [
        ("superseded", None), ("forgotten", run["id"]), ("active", reversal["id"])]
    restored = (await gateway.admin.get(f"/v1/memories/{memory}/records/{kept['id']}")).json()
    assert (restored["version"], restored["attributes"]) == (3, {"a": 1})

    original = (await gateway.admin.get(f"/v1/memories/{memory}/consolidations/{run['id']}")).json()
    assert original["x.memfed"]["reverted_by"] == reversal["id"]
    changes = (await gateway.admin.get(f"/v1/memories/{memory}/consolidations/{run['id']}/changes")).json()["data"]
    assert all(c["reverted"] for c in changes)
    again = await gateway.admin.post(f"/v1/memories/{memory}/consolidations/{run['id']}/revert")
    assert (again.status_code, again.json()["error"]["code"]) == (409, "memfed_consolidation_reverted")

    later = await start(gateway, memory)
    assert later["changes"] == {"created": 0, "superseded": 0, "forgotten": 0}
    listed = (await gateway.admin.get(f"/v1/memories/{memory}/consolidations")).json()["data"]
    assert [r["id"] for r in listed] == [later["id"], reversal["id"], run["id"]]


async def test_a_move_or_delete_during_a_run_is_memory_busy(gateway: Gateway) -> None:
    """§12: while a run changes a memory, moving or deleting it (or a memory above it) is 409
    memory_busy, and so is a second run; the run is listed as running. Once it ends, both work."""
    root = (await gateway.root("Company"))["id"]
    memory = (await gateway.child(gateway.admin, root, "Team"))["id"]
    target = (await gateway.root("Elsewhere"))["id"]
    await remember(gateway, memory, "A fact.")
    provider = paused(gateway)

    running = asyncio.create_task(gateway.admin.post(f"/v1/memories/{memory}/consolidations", json={}))
    await provider.started.wait()
    listed = (await gateway.admin.get(f"/v1/memories/{memory}/consolidations")).json()["data"]
    assert [r["status"] for r in listed] == ["running"]
    run_id = listed[0]["id"]
    attempts = [
        gateway.admin.put(f"/v1/memories/{memory}", json={"parent_id": target}),
        gateway.admin.delete(f"/v1/memories/{memory}"),
        gateway.admin.delete(f"/v1/memories/{root}"),
        gateway.admin.post(f"/v1/memories/{memory}/consolidations", json={}),
    ]
    for attempt in attempts:
        answer = await attempt
        assert (answer.status_code, answer.json()["error"]["code"]) == (409, "memory_busy"), answer.text
        assert answer.json()["error"]["detail"] == {"consolidation_id": run_id}
    early = await gateway.admin.post(f"/v1/memories/{memory}/consolidations/{run_id}/revert")
    assert (early.status_code, early.json()["error"]["code"]) == (409, "memfed_consolidation_running")

    provider.release.set()
    finished = await running
    assert finished.status_code == 201 and finished.json()["status"] == "completed"
    moved = await gateway.admin.put(f"/v1/memories/{memory}", json={"parent_id": target})
    assert moved.status_code == 200, moved.text
    assert (await gateway.admin.delete(f"/v1/memories/{memory}")).status_code == 200


async def test_a_failed_run_is_recorded_and_frees_the_memory(gateway: Gateway) -> None:
    """A provider that fails mid-run gives a run with status failed and the reason, never a 500, and the
    memory is no longer busy."""
    memory = (await gateway.root("Notes"))["id"]
    provider = paused(gateway, fail=ProviderUnavailable("disk gone"))
    provider.release.set()
    run = await start(gateway, memory)
    assert (run["status"], run["error"]) == ("failed", "unavailable")
    assert gateway.services.busy == {}
    assert (await gateway.admin.delete(f"/v1/memories/{memory}")).status_code == 200


async def test_runs_sit_under_the_memorys_access(gateway: Gateway) -> None:
    """Starting or reverting needs write; reading runs needs read; a stranger is told there is no such
    memory; a budget below 1 is memory_invalid."""
    memory = (await gateway.root("Notes"))["id"]
    reader_id, reader = await gateway.member("reader", "agent")
    _, stranger = await gateway.member("stranger", "agent")
    await gateway.grant(memory, f"member:{reader_id}", "read")
    run = await start(gateway, memory)

    refused = await reader.post(f"/v1/memories/{memory}/consolidations", json={})
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "memory_forbidden")
    refused = await reader.post(f"/v1/memories/{memory}/consolidations/{run['id']}/revert")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "memory_forbidden")
    assert (await reader.get(f"/v1/memories/{memory}/consolidations")).status_code == 200
    hidden = await stranger.get(f"/v1/memories/{memory}/consolidations/{run['id']}")
    assert (hidden.status_code, hidden.json()["error"]["code"]) == (404, "memory_not_found")
    bad = await gateway.admin.post(f"/v1/memories/{memory}/consolidations", json={"budget": 0})
    assert (bad.status_code, bad.json()["error"]["code"]) == (422, "memory_invalid")


async def test_a_provider_without_runs_is_memory_unsupported(gateway: Gateway) -> None:
    """A provider that does not expose consolidation runs answers a start with memory_unsupported."""
    from tests.api.test_types import Untyped

    memory = (await gateway.root("Notes"))["id"]
    handle = gateway.services.providers.handles["local"]
    handle.provider = Untyped(handle.provider)  # type: ignore[assignment]
    answer = await gateway.admin.post(f"/v1/memories/{memory}/consolidations", json={})
    assert (answer.status_code, answer.json()["error"]["code"]) == (422, "memory_unsupported")


async def test_a_run_left_running_by_a_dead_process_is_failed_and_a_live_one_holds_the_memory(
    gateway: Gateway,
) -> None:
    """A row still running long after any run could (its process died) is marked failed when the next
    run starts; a recent running row (another process's run) makes the start memory_busy."""
    from gateway.api.consolidations import STALE_MS
    from gateway.state.consolidation_schema import consolidation_runs

    memory = (await gateway.root("Notes"))["id"]
    now_ms = int(datetime.now().timestamp() * 1000)
    row = {"memory_id": memory, "provider": "local", "status": "running", "trigger": "manual", "read": "{}",
           "changes": "{}", "budget": "{}", "usage": "{}", "created_by": "member:x", "error": ""}
    await gateway.services.store.rows.insert(consolidation_runs, id="hcon_" + "1" * 32, started_at=now_ms, **row)
    busy = await gateway.admin.post(f"/v1/memories/{memory}/consolidations", json={})
    assert (busy.status_code, busy.json()["error"]["code"]) == (409, "memory_busy")
    assert gateway.services.busy == {}

    await gateway.services.store.rows.delete_rows(consolidation_runs, id="hcon_" + "1" * 32)
    await gateway.services.store.rows.insert(consolidation_runs, id="hcon_" + "2" * 32,
                                        started_at=now_ms - STALE_MS - 1, **row)
    run = await start(gateway, memory)
    assert run["status"] == "completed"
    dead = (await gateway.admin.get(f"/v1/memories/{memory}/consolidations/hcon_{'2' * 32}")).json()
    assert (dead["status"], dead["error"]) == ("failed", "interrupted: the server stopped during the run")
