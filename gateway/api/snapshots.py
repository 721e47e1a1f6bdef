"""Snapshots (§5.3): a name for an instant. Nothing is copied; reading `as_of` its time is the same read.

A snapshot is only made where it can be read: on a memory whose provider cannot read `as_of` (mem0) it is
refused, rather than kept as a name no read could ever use.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gateway.api._calls import handle_for
from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require
from gateway.api.models import Snapshot
from gateway.api.render import iso, page_json
from gateway.api.responses import SnapshotList, SnapshotOut
from gateway.base.clock import now_ms
from gateway.base.errors import snapshot_exists, unsupported
from gateway.base.ids import new_id
from gateway.state.records import Snapshot as SnapshotRow


def snapshot_json(row: SnapshotRow) -> dict[str, Any]:
    return {"id": row.id, "object": "memory.snapshot", "memory_id": row.memory_id, "name": row.name,
            "message": row.message, "at": iso(datetime.fromtimestamp(row.at / 1000, UTC))}


async def create_snapshot(call: Call) -> dict[str, Any]:
    body = call.body_as(Snapshot)
    memory_id = call.path["memory_id"]
    node = require(call, memory_id, "write", "snapshots.create")
    if not handle_for(call.services, node).capabilities().as_of:
        raise unsupported(f"The memory's provider ({node.provider}) cannot read a memory as it stood at an "
                          "instant (as_of), so a snapshot of it could never be read.")
    made = SnapshotRow(new_id("snapshot"), memory_id, body.name, body.message, now_ms(), call.authenticated().member_id)
    if not await call.services.store.snapshots.create(made):
        raise snapshot_exists()
    return snapshot_json(made)


async def list_snapshots(call: Call) -> dict[str, Any]:
    memory_id = call.path["memory_id"]
    require(call, memory_id, "read", "snapshots.list")
    rows = await call.services.store.snapshots.of_memory(memory_id)
    return page_json((snapshot_json(r) for r in rows), None)


ENDPOINTS = [
    Endpoint("POST", "/v1/memories/{memory_id}/snapshots", create_snapshot, "Name this instant.",
             "snapshots.create", body=Snapshot, response=SnapshotOut, status=201, write=True, tags=("records",)),
    Endpoint("GET", "/v1/memories/{memory_id}/snapshots", list_snapshots, "The memory's snapshots, oldest first.",
             "snapshots.list", response=SnapshotList, tags=("records",)),
]
