"""Consolidation runs (§9.2): start one, list them, read one and its changes, revert one by appending.

The gateway owns each run: it mints the id, stamps `written_by {kind: provider, id: <provider>,
consolidation_id: <run>}` on what the provider writes, keeps the run and its changes in its own tables
(gateway/state/consolidations.py), and marks the memory busy while the run changes it, so a move
or a delete answers 409 `memory_busy` (§12). The provider does the pass (adapters/consolidation.py).

A start runs the pass now and answers the finished run. The pass runs in a task of its own that the
request only waits for (shielded): a client that hangs up does not cut a run halfway, and the run is
recorded as it ended either way. While it runs, it is listed as `running`.

A revert is itself a run (`x.memfed.reverts` names the run it undid), with its own id stamped on what
it appends, so history keeps both the run and its reversal.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import Field

from adapters import cursors
from adapters.base import Provider, ProviderError, ProviderRejected, Unsupported, Writer
from adapters.consolidation import CHANGE_KINDS, Change, ConsolidatingProvider, Reversal, RunOutcome
from gateway.api._calls import handle_for
from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require
from gateway.api.models import Page, Strict
from gateway.api.responses_agent import ChangeList, RunList, RunOut
from gateway.base.clock import now, now_ms, rfc3339_or_none
from gateway.base.errors import (
    ApiError,
    bad_cursor,
    busy,
    consolidation_not_found,
    consolidation_provider_changed,
    consolidation_reverted,
    consolidation_running,
    unsupported,
)
from gateway.base.ids import new_id
from gateway.federation.providers import ProviderHandle
from gateway.state.consolidations import Busy, Run
from gateway.state.tree import MemoryNode

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("memfed.api.consolidations")

# A run is bounded by its budget, not by the per-call timeout meant for one read or write; this only
# keeps a provider that never answers from holding the memory busy for good.
RUN_SECONDS = 600.0
# A row still `running` this long after it started belongs to a process that died mid-run.
STALE_MS = int((RUN_SECONDS + 60) * 1000)
_TASKS: set[asyncio.Task[None]] = set()  # strong references: a task nothing holds may be collected


class StartRun(Strict):
    budget: int | None = Field(default=None, ge=1, le=1_000_000_000)


def _instant(moment: datetime | None) -> str | None:
    """`read.through` to the microsecond: the next run resumes strictly after it, so a coarser stamp
    would read again (and, on a small budget, stop again at) what was read last."""
    return rfc3339_or_none(moment, "microseconds")


def _busy(run_id: str, message: str = "A consolidation run is changing this memory.") -> ApiError:
    return busy(message, detail={"consolidation_id": run_id})


def _consolidating(services: Services, node: MemoryNode) -> tuple[ProviderHandle, ConsolidatingProvider]:
    handle = handle_for(services, node)
    if not isinstance(handle.provider, ConsolidatingProvider) or handle.capabilities().consolidate != "runs":
        raise unsupported("The memory's provider does not expose consolidation runs.")
    return handle, handle.provider


# --------------------------------------------------------------------------- rows


async def _run_row(services: Services, memory_id: str, run_id: str) -> Run:
    run: Run | None = await services.store.consolidations.get(memory_id, run_id)
    if run is None:
        raise consolidation_not_found()
    return run


def run_json(row: Run) -> dict[str, Any]:
    """A run in §9.2's shape; memfed's additions under `x.memfed`."""
    return {
        "id": row.id,
        "object": "memory.consolidation",
        "memory_id": row.memory_id,
        "status": row.status,
        "trigger": row.trigger,
        "started_at": row.started_at // 1000,
        "finished_at": row.finished_at // 1000 if row.finished_at is not None else None,
        "read": json.loads(row.read),
        "changes": json.loads(row.changes),
        "usage": json.loads(row.usage),
        "budget": json.loads(row.budget),
        "written_by": {"kind": "provider", "id": row.provider},
        "error": row.error,
        "x.memfed": {"reverts": row.reverts, "reverted_by": row.reverted_by, "resumed_after": row.resumed_after,
                     "started_by": row.created_by},
    }


def _summary(changes: Sequence[Change]) -> dict[str, int]:
    return {kind: sum(1 for c in changes if c.kind == kind) for kind in CHANGE_KINDS}


async def _begin(call: Call, node: MemoryNode, handle: ProviderHandle, unit: str, budget: int | None, *,
                 resumed_after: str | None = None, reverts: str | None = None) -> Run:
    """Claim the memory for a new run and write its row as `running`; the run as written."""
    services = call.services
    if services.store.claims.deleting(node.id):  # its records are being dropped: a run would outlive them
        raise busy("This memory is being deleted.")
    if node.id in services.busy:
        raise _busy(services.busy[node.id])
    run_id = new_id("consolidation")
    services.busy[node.id] = run_id  # claimed before the first await, so two starts cannot both pass
    stamp = now_ms()
    run = Run(run_id, node.id, handle.name, "running", "manual", stamp, None,
              read=json.dumps({unit: 0, "through": None}), changes=json.dumps(_summary(())),
              budget=json.dumps({"limit": budget, "unit": unit, "exhausted": False}), usage="{}",
              resumed_after=resumed_after, reverts=reverts, reverted_by=None, created_by=call.authenticated().principal,
              error="")
    try:
        # A run another process still runs holds the memory too; one whose process died is failed there.
        return await services.store.consolidations.begin(
            run, stale_before=stamp - STALE_MS, interrupted="interrupted: the server stopped during the run")
    except Busy as held:
        services.busy.pop(node.id, None)
        raise _busy(held.run_id) from None
    except BaseException:
        services.busy.pop(node.id, None)
        raise


async def _in_background(work: Coroutine[Any, Any, None]) -> None:
    task = asyncio.get_running_loop().create_task(work)
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)
    await asyncio.shield(task)


def _failure(exc: BaseException) -> str:
    if isinstance(exc, ProviderRejected | Unsupported):
        return f"{exc.reason}: {exc}"
    if isinstance(exc, ProviderError):
        return exc.reason  # a vendor's own message may carry what is not ours to show
    return "adapter_error"


async def _finish(services: Services, node_id: str, run_id: str, changes: Sequence[Change], **values: str) -> None:
    try:
        await services.store.consolidations.finish(run_id, [(c.record_id, c.kind, c.version) for c in changes],
                                                   at=now_ms(), changes=json.dumps(_summary(changes)), **values)
    finally:
        if services.busy.get(node_id) == run_id:
            del services.busy[node_id]


# --------------------------------------------------------------------------- start


async def _resume_point(services: Services, memory_id: str) -> str | None:
    """Where the next run starts: after `read.through` of the last run if it stopped at its budget;
    from the beginning after a completed one (what has expired since must be read again)."""
    last: Run | None = await services.store.consolidations.last_finished(memory_id)
    if last is None or last.status != "stopped":
        return None
    through = json.loads(last.read).get("through")
    return through if isinstance(through, str) else None


def _consolidate(memory_id: str, run_id: str, budget: int | None, after: str | None, by: Writer,
                 seen: list[Change]) -> Callable[[Provider], Awaitable[RunOutcome]]:
    resume_after = datetime.fromisoformat(after.replace("Z", "+00:00")) if after else None

    async def run(provider: Provider) -> RunOutcome:
        if not isinstance(provider, ConsolidatingProvider):
            raise Unsupported("the memory's provider does not expose consolidation runs")
        return await provider.consolidate(memory_id, run_id, budget=budget, resume_after=resume_after, by=by,
                                          at=now(), on_change=seen.append)

    return run


async def _execute(services: Services, handle: ProviderHandle, node_id: str, run_id: str, budget: int | None,
                   after: str | None, unit: str) -> None:
    seen: list[Change] = []
    by = Writer("provider", handle.name, consolidation_id=run_id)
    try:
        outcome = await handle.call(_consolidate(node_id, run_id, budget, after, by, seen), read=False,
                                    seconds=RUN_SECONDS)
    except BaseException as exc:
        if not isinstance(exc, ProviderError):
            log.exception("consolidation run %s failed", run_id)
        # What the provider reported before it failed stays recorded, so the run can still be reverted.
        await _finish(services, node_id, run_id, seen, status="failed", error=_failure(exc),
                      read=json.dumps({unit: None, "through": None}))
        if not isinstance(exc, Exception):
            raise
        return
    read = {outcome.read.unit: outcome.read.count, "through": _instant(outcome.read.through)}
    await _finish(services, node_id, run_id, outcome.changes, status=outcome.status, read=json.dumps(read),
                  usage=json.dumps(outcome.usage),
                  budget=json.dumps({"limit": budget, "unit": unit, "exhausted": outcome.budget_exhausted}))


async def start(call: Call) -> dict[str, Any]:
    body = call.body_as(StartRun)
    node = require(call, call.path["memory_id"], "write", "consolidations.start")
    handle, provider = _consolidating(call.services, node)
    unit = provider.consolidation_unit()
    after = await _resume_point(call.services, node.id)
    run = await _begin(call, node, handle, unit, body.budget, resumed_after=after)
    await _in_background(_execute(call.services, handle, node.id, run.id, body.budget, after, unit))
    return run_json(await _run_row(call.services, node.id, run.id))


# --------------------------------------------------------------------------- reads


RUNS, CHANGES = "consolidation.runs", "consolidation.changes"


def _position(listing: str, cursor: str, shape: tuple[type, ...]) -> tuple[Any, ...]:
    try:
        return cursors.decode(listing, cursor, shape)
    except cursors.InvalidCursor:
        raise bad_cursor() from None


async def list_runs(call: Call) -> dict[str, Any]:
    query = call.query_as(Page)
    node = require(call, call.path["memory_id"], "read", "consolidations.list")
    before = _position(RUNS, query.cursor, (int, str)) if query.cursor else None
    rows = await call.services.store.consolidations.page(node.id, before, query.limit + 1)
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    return {"object": "list", "data": [run_json(r) for r in rows],
            "next": cursors.encode(RUNS, (rows[-1].started_at, rows[-1].id)) if more else None}


async def get_run(call: Call) -> dict[str, Any]:
    node = require(call, call.path["memory_id"], "read", "consolidations.get")
    return run_json(await _run_row(call.services, node.id, call.path["run_id"]))


async def list_changes(call: Call) -> dict[str, Any]:
    query = call.query_as(Page)
    node = require(call, call.path["memory_id"], "read", "consolidations.changes")
    run = await _run_row(call.services, node.id, call.path["run_id"])
    after = -1
    if query.cursor:
        (after,) = _position(CHANGES, query.cursor, (int,))
    rows = await call.services.store.consolidations.written(run.id, after=after, limit=query.limit + 1)
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    data = [{"object": "memory.consolidation.change", "run_id": run.id, "record_id": r.record_id, "kind": r.kind,
             "version": r.version, "reverted": r.reverted} for r in rows]
    following = cursors.encode(CHANGES, (rows[-1].seq,)) if more else None
    return {"object": "list", "data": data, "next": following}


# --------------------------------------------------------------------------- revert


async def _execute_revert(services: Services, handle: ProviderHandle, node_id: str, run: Run, revert_id: str,
                          changes: list[Change]) -> None:
    by = Writer("provider", handle.name, consolidation_id=revert_id)

    async def undo(provider: Provider) -> Reversal:
        if not isinstance(provider, ConsolidatingProvider):
            raise Unsupported("the memory's provider does not expose consolidation runs")
        return await provider.revert(node_id, run.id, changes, by=by, at=now())

    try:
        reversal = await handle.call(undo, read=False, seconds=RUN_SECONDS)
    except BaseException as exc:
        if not isinstance(exc, ProviderError):
            log.exception("reverting consolidation run %s failed", run.id)
        await _finish(services, node_id, revert_id, (), status="failed", error=_failure(exc))
        if not isinstance(exc, Exception):
            raise
        return
    skipped = set(reversal.skipped)
    undone = [c.record_id for c in changes if c.record_id not in skipped]
    await services.store.consolidations.mark_reverted(run.id, undone, revert_id)
    read = {"changes": len(changes), "through": None, "skipped": list(reversal.skipped)}
    await _finish(services, node_id, revert_id, reversal.changes, status="completed", read=json.dumps(read),
                  usage=json.dumps({"input_tokens": 0, "output_tokens": 0}))


async def revert(call: Call) -> dict[str, Any]:
    services = call.services
    node = require(call, call.path["memory_id"], "write", "consolidations.revert")
    run = await _run_row(services, node.id, call.path["run_id"])
    if run.status in ("queued", "running"):
        raise consolidation_running()
    if run.reverted_by:
        raise consolidation_reverted(run.reverted_by)
    if run.provider != node.provider:
        raise consolidation_provider_changed()
    handle, _ = _consolidating(services, node)
    rows = await services.store.consolidations.written(run.id, unreverted=True)
    changes = [Change(r.record_id, r.kind, r.version) for r in rows]
    undoing = await _begin(call, node, handle, "changes", None, reverts=run.id)
    await _in_background(_execute_revert(services, handle, node.id, run, undoing.id, changes))
    return run_json(await _run_row(services, node.id, undoing.id))


M = "/v1/memories/{memory_id}/consolidations"
ENDPOINTS = [
    Endpoint("POST", M, start, "Start a consolidation run now; a budget is optional.", "consolidations.start",
             body=StartRun, status=201, write=True, response=RunOut, tags=("consolidations",)),
    Endpoint("GET", M, list_runs, "The memory's consolidation runs, newest first.", "consolidations.list",
             query=Page, response=RunList, tags=("consolidations",)),
    Endpoint("GET", M + "/{run_id}", get_run, "One consolidation run.", "consolidations.get",
             response=RunOut, tags=("consolidations",)),
    Endpoint("GET", M + "/{run_id}/changes", list_changes, "The records the run wrote, superseded or forgot.",
             "consolidations.changes", query=Page, response=ChangeList, tags=("consolidations",)),
    Endpoint("POST", M + "/{run_id}/revert", revert, "Undo a run by appending; history keeps both.",
             "consolidations.revert", status=201, write=True, response=RunOut, tags=("consolidations",)),
]
