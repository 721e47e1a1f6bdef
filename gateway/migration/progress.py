"""How far a provider swap started over the API has got, for `GET /v1/memories/{id}/migrate`.

A migration runs inside its POST (gateway/api/migration.py); while it does, its copy passes report
(records finished, records to copy) here, and whoever started it (the console polls) can watch it. The
board is per services object and in this process: the last swap of each memory stays readable until the
next one starts there. A swap run with `memfed migrate` shows its own progress bar instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.base.clock import now, rfc3339

if TYPE_CHECKING:
    from gateway.services import Services

_BOARDS: dict[int, dict[str, dict[str, Any]]] = {}


def start(services: Services, memory_id: str, to: str, recursive: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "object": "memory.migration.progress", "memory_id": memory_id, "to": to, "recursive": recursive,
        "state": "running", "passes": 0, "done": 0, "total": None, "started_at": _now(), "finished_at": None,
        "report": None, "error": None,
    }
    board = _BOARDS.setdefault(id(services), {})
    if board.get(memory_id, {}).get("state") != "running":  # a second swap meanwhile is refused as busy:
        board[memory_id] = entry                             # the first one's progress stays on the board
    return entry


def reporter(entry: dict[str, Any]) -> Any:
    """The `progress` callback of a swap. Each pass (the copy, then catch-ups with writes made meanwhile)
    starts at (0, its total) and counts up; the entry adds the passes up, so `done` of `total` only grows."""
    finished_passes = 0  # records of the passes before the current one

    def progress(done: int, total: int) -> None:
        nonlocal finished_passes
        if done == 0:
            if entry["passes"]:
                finished_passes = entry["total"] or 0
            entry["passes"] += 1
        entry["done"], entry["total"] = finished_passes + done, finished_passes + total

    return progress


def finish(entry: dict[str, Any], *, report: dict[str, Any] | None = None, error: dict[str, Any] | None = None) -> None:
    entry.update(state="failed" if error is not None else "completed", finished_at=_now(), report=report,
                 error=error)


def read(services: Services, memory_id: str) -> dict[str, Any] | None:
    entry = _BOARDS.get(id(services), {}).get(memory_id)
    return dict(entry) if entry is not None else None


def _now() -> str:
    return rfc3339(now(), "seconds")
