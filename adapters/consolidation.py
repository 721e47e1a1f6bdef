"""Consolidation runs (UHP Memories §9.2): an optional part of the provider contract.

A provider that rewrites what a memory holds in the background does it as runs the gateway can see,
bound and undo. The gateway owns the run (its id, its row, who started it, `memory_busy` while it
runs); the provider does the pass and reports what it read, what it wrote and what it spent.

Every version a run writes is stamped with the `by` the gateway hands in: `kind` "provider", the
provider's name, and `consolidation_id` the run's id (§9.2), so a reader can tell what consolidation
concluded from what a member stated, and which run to revert.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from adapters.base import Writer

ChangeKind = Literal["created", "superseded", "forgotten"]
CHANGE_KINDS: tuple[ChangeKind, ...] = ("created", "superseded", "forgotten")
RunStatus = Literal["completed", "stopped"]


@dataclass(frozen=True)
class Change:
    """One version a run wrote: a new record (`created`), a new version over the current one
    (`superseded`: the record's previous version was superseded), or a tombstone (`forgotten`).
    `version` is the version the run wrote."""

    record_id: str
    kind: ChangeKind
    version: int


@dataclass(frozen=True)
class RunRead:
    """What a run read: `count` items of `unit` (records, episodes), the last written at `through`."""

    count: int
    through: datetime | None
    unit: str = "records"


@dataclass(frozen=True)
class RunOutcome:
    """How a pass ended. `stopped` means the budget ran out: what was done stays done, and the next run
    is asked to resume after `read.through`."""

    status: RunStatus
    read: RunRead
    changes: tuple[Change, ...] = ()
    budget_exhausted: bool = False
    usage: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Reversal:
    """What a revert appended, and the records it left alone because they changed after the run."""

    changes: tuple[Change, ...]
    skipped: tuple[str, ...] = ()


ChangeSink = Callable[[Change], None]


@runtime_checkable
class ConsolidatingProvider(Protocol):
    """A provider whose consolidation the gateway exposes as runs (`consolidate: "runs"`)."""

    def consolidation_unit(self) -> str:
        """What a run's budget counts: "records", "episodes", "tokens"."""
        ...

    async def consolidate(
        self,
        memory_id: str,
        run_id: str,
        *,
        budget: int | None,
        resume_after: datetime | None,
        by: Writer,
        at: datetime,
        on_change: ChangeSink | None = None,
    ) -> RunOutcome:
        """One pass over the memory, reading only what was written after `resume_after` (None: from the
        beginning), spending at most about `budget` units (None: no limit). `at` is the run's now: it
        decides what has expired and stamps what the run writes. `on_change` is told of each change as
        it is written, so that a run that fails halfway still reports what it did."""
        ...

    async def revert(
        self,
        memory_id: str,
        run_id: str,
        changes: Sequence[Change],
        *,
        by: Writer,
        at: datetime,
    ) -> Reversal:
        """Undo `changes` by appending (§9.2): what the run superseded or forgot becomes current again
        as a new version; what it created is forgotten. A record changed since the run is left as it is
        and reported in `skipped`: reverting would overwrite a later statement."""
        ...
