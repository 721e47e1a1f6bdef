"""One question to many providers: group the plan by provider, ask them all at once, merge the answers.

A provider that is slow, failing, rate-limited or resting behind its breaker becomes a `degraded`
entry (`provider:NAME:timeout`); the others' answers are still returned. All of it fits in one deadline
(a loop time): each provider's waits, calls and retry are bounded by it (gateway/federation/providers.py),
and a provider still not done when it passes is left behind as `provider:NAME:deadline`. A hit for a
memory the provider was not asked about is dropped and reported, so an `enforced_filter` vendor that
forgets a filter cannot leak another memory's records.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from adapters import degraded as entries
from adapters.base import Hit, Provider, ProviderError, RecallAnswer, RecallQuery
from gateway.federation import scoring
from gateway.federation.providers import ProviderHandle, Providers
from gateway.telemetry import metrics
from policies.capabilities import SignalSplit, emulation_notes, narrow, signal_degradations, split_signals
from policies.recall import fuse

log = logging.getLogger("memfed.federation")
GRACE = 0.05
# Turns of the event loop a vendor call takes from its task's start to its request's write on a kept-alive
# connection: the adapter and its gate, httpx's connection pool, httpcore's two locks and anyio's stream
# each yield once (4 with httpx 0.28 and httpcore 1.0, measured by stamping the socket write); 6 for margin.
SEND_TURNS = 6


@dataclass(frozen=True)
class FederatedHit:
    hit: Hit
    provider: str
    score: float
    parts: scoring.Components | None = None  # why it ranks here (uniform scoring only)


@dataclass(frozen=True)
class FederatedAnswer:
    hits: tuple[FederatedHit, ...]
    degraded: tuple[str, ...]
    abstain: bool
    calls: int
    # Each provider's time on this recall (ms), from its first call until its answer or failure.
    timings: Mapping[str, float] = field(default_factory=dict)


async def recall(
    providers: Providers, memories_by_provider: Mapping[str, Sequence[str]], query: RecallQuery,
    method: str = "uniform",
    *, deadline: float | None = None,
) -> FederatedAnswer:
    degraded: list[str] = []
    splits: dict[str, SignalSplit] = {}
    timings: dict[str, float] = {}
    # The question's words, when the union is scored by them: each provider's candidates are cut into
    # words as soon as its answer is in, while the others are still awaited, not all of them at the end.
    words = scoring.terms(query.query or query.text or "") if method == "uniform" else []
    asking = _asks(providers, memories_by_provider, query, method, degraded, splits)
    tasks = await _start(asking, deadline, bool(words), timings)
    metrics.recall_fanout(sum(len(ids) for ids in memories_by_provider.values()), len(tasks))
    degraded.extend(signal_degradations(splits))
    emulations_at = len(degraded)  # filled in once the answers are in: an answer may change what is emulated
    await _until(deadline, tasks.values())
    gathered = _gather(tasks, degraded)
    degraded[emulations_at:emulations_at] = emulation_notes(query, {n: providers[n].capabilities() for n in tasks})
    by_key = gathered.by_key
    if method == "uniform":
        merged = scoring.merge(query.query or query.text, gathered.ranked_by, {}, words=gathered.words_of)
        hits = tuple(FederatedHit(by_key[key].hit, by_key[key].provider, parts.fused, parts)
                     for key, parts in merged[: query.limit])
    else:
        hits = tuple(FederatedHit(by_key[key].hit, by_key[key].provider, round(score, 6))
                     for key, score in fuse(list(gathered.ranked_by.values()))[: query.limit])
    # Nothing returned, or every provider that answered judged its answer no answer: say so.
    abstentions = gathered.abstentions
    abstain = not hits or (bool(abstentions) and all(abstentions))
    return FederatedAnswer(hits, tuple(dict.fromkeys(degraded)), abstain, gathered.calls, timings)


_Ask = tuple[str, ProviderHandle, Sequence[str], RecallQuery]


def _asks(providers: Providers, memories_by_provider: Mapping[str, Sequence[str]], query: RecallQuery,
          method: str, degraded: list[str], splits: dict[str, SignalSplit]) -> list[_Ask]:
    """Each provider to ask, with its memories and the question narrowed to what it can search by; a
    provider not connected is noted in `degraded`, each one's split of the signals in `splits`."""
    asking: list[_Ask] = []
    for name, memory_ids in memories_by_provider.items():
        handle = providers.get(name)
        if handle is None:
            degraded.append(entries.provider_entry(name, "not_connected"))
            continue
        split = split_signals(query, handle.capabilities())
        splits[name] = split
        if not split.asked:
            continue  # nothing this provider can search by; said once below in the signal entries
        narrowed = narrow(query, split.asked)
        if method == "uniform":  # more candidates than `limit`, so the union holds what one index would rank first
            narrowed = replace(narrowed, limit=scoring.depth(query.limit))
        asking.append((name, handle, memory_ids, narrowed))
    return asking


async def _start(asking: list[_Ask], deadline: float | None, with_words: bool,
                 timings: dict[str, float]) -> dict[str, asyncio.Task[_Read]]:
    """A task per provider asked, in the plan's order.

    The vendors reached over the network are asked first, the embedded provider (whose search is work
    in this process) once their calls are sent: asked with them, its own work held their calls back by
    about a millisecond. The answers are read in the plan's order: the order asked changes nothing."""
    started: dict[str, asyncio.Task[_Read]] = {}
    try:
        for embedded in (False, True):
            if embedded and started:
                await sent()
            for name, handle, memory_ids, narrowed in asking:
                if handle.config.embedded == embedded:
                    started[name] = asyncio.create_task(_read(handle, memory_ids, narrowed, deadline, with_words))
                    started[name].add_done_callback(_stopwatch(timings, name))
    except BaseException:  # the caller went away while the vendors' calls were being sent
        for task in started.values():
            task.cancel()
        raise
    return {name: started[name] for name, *_ in asking}


@dataclass
class _Gathered:
    """The providers' answers put together: each hit once (the first provider to rank it keeps it)."""

    by_key: dict[tuple[str, str], FederatedHit] = field(default_factory=dict)
    ranked_by: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    words_of: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    abstentions: list[bool] = field(default_factory=list)
    calls: int = 0


def _gather(tasks: Mapping[str, asyncio.Task[_Read]], degraded: list[str]) -> _Gathered:
    """Read each finished task in the plan's order; what failed or did not finish becomes `degraded`."""
    gathered = _Gathered()
    for name, task in tasks.items():
        read = _finished(name, task, degraded)
        if isinstance(read, int):
            gathered.calls += read
            continue
        answer = read.answer
        gathered.calls += read.calls
        if read.outside:
            degraded.append(entries.provider_entry(name, "answered_outside_scope"))
        ranking = [key for key in read.ranking if key not in gathered.by_key]
        gathered.by_key.update((key, FederatedHit(read.hits[key], name, 0.0)) for key in ranking)
        if read.words is not None:
            gathered.words_of.update((key, read.words[key]) for key in ranking)
        gathered.ranked_by[name] = ranking
        gathered.abstentions.append(answer.abstain)
        degraded.extend(entries.provider_entry(name, d) for d in answer.degraded)
        degraded.extend(entries.provider_entry(name, entries.entry(s, "emulated")) for s in answer.emulated)
    return gathered


def _finished(name: str, task: asyncio.Task[_Read], degraded: list[str]) -> _Read | int:
    """The task's answer, or the calls it made (noting why in `degraded`) when it has none."""
    if not task.done():  # an adapter's own work outlived the deadline its calls were given
        task.cancel()
        degraded.append(entries.provider_entry(name, "deadline"))
        return 0
    try:
        return task.result()
    except ProviderError as exc:
        degraded.append(entries.provider_entry(name, exc.reason))
        if exc.reason in ("timeout", "deadline"):
            metrics.deadline_missed(name)
        return 1
    except Exception:  # an adapter bug degrades the answer; it must not fail the whole recall
        log.exception("provider %s failed during recall", name)
        degraded.append(entries.provider_entry(name, "unavailable"))
        return 0


async def sent() -> None:
    """Until the vendor calls started just before have been written to their sockets (a new connection's
    handshake is not waited for): the loop is given the turns they take to get there."""
    for _ in range(SEND_TURNS):
        await asyncio.sleep(0)


def _stopwatch(timings: dict[str, float], name: str) -> Callable[[asyncio.Task[Any]], None]:
    """A done-callback that notes in `timings` how long the task ran since now."""
    started = time.perf_counter()

    def stop(_: asyncio.Task[Any]) -> None:
        timings[name] = (time.perf_counter() - started) * 1000

    return stop


async def _until(deadline: float | None, tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Wait for every task, or until the deadline; a caller cancelled meanwhile cancels them all."""
    waiting = list(tasks)
    if not waiting:
        return
    # A moment past the deadline: a call cut by it reports its own reason before being left behind.
    timeout = None if deadline is None else max(0.0, deadline + GRACE - asyncio.get_running_loop().time())
    try:
        await asyncio.wait(waiting, timeout=timeout)
    except BaseException:
        for task in waiting:
            task.cancel()
        raise


@dataclass(frozen=True)
class _Read:
    """One provider's answer, read while the others are awaited: its hits within the memories it was
    asked about, each once, best first (`ranking`, keyed by memory and record id), whether it answered
    outside them, and each kept hit's words for the uniform score (None when the question has none)."""

    answer: RecallAnswer
    calls: int
    ranking: list[tuple[str, str]]
    hits: dict[tuple[str, str], Hit]
    outside: bool
    words: dict[tuple[str, str], list[str]] | None


async def _read(handle: ProviderHandle, memory_ids: Sequence[str], query: RecallQuery, deadline: float | None,
                scored: bool) -> _Read:
    answer, made = await _ask(handle, memory_ids, query, deadline)
    asked = set(memory_ids)
    hits: dict[tuple[str, str], Hit] = {}
    outside = False
    for hit in answer.hits:
        if hit.record.memory_id not in asked:
            outside = True  # dropped: an `enforced_filter` vendor that forgot a filter must not leak
            continue
        hits.setdefault((hit.record.memory_id, hit.record.id), hit)
    seen: dict[str, str | None] = {}
    words = {key: scoring.terms(scoring.text_of(hit.record), seen) for key, hit in hits.items()} if scored else None
    return _Read(answer, made, list(hits), hits, outside, words)


async def _ask(handle: ProviderHandle, memory_ids: Sequence[str], query: RecallQuery,
               deadline: float | None) -> tuple[RecallAnswer, int]:
    """One call for all memories where the vendor can search several; else bounded calls, one each."""
    if handle.capabilities().searches_many_memories or len(memory_ids) == 1:
        answer = await handle.call(lambda p: p.recall(memory_ids, query), read=True, deadline=deadline)
        return answer, 1

    async def one(memory_id: str) -> RecallAnswer:
        def ask(p: Provider) -> Any:
            return p.recall([memory_id], query)

        return await handle.call(ask, read=True, deadline=deadline)

    results = await asyncio.gather(*(one(m) for m in memory_ids), return_exceptions=True)
    answers = [r for r in results if isinstance(r, RecallAnswer)]
    failures = [r for r in results if isinstance(r, BaseException)]
    if not answers and failures:
        raise failures[0]
    # Scores from one provider are comparable with each other, so its per-memory lists merge by score.
    merged = sorted((h for a in answers for h in a.hits), key=lambda h: (-h.score, h.record.memory_id, h.record.id))
    degraded = tuple(sorted({d for a in answers for d in a.degraded}))
    if failures:
        degraded += (entries.entry("partial", f"{len(failures)}_of_{len(memory_ids)}_memories_failed"),)
    emulated = tuple(dict.fromkeys(s for a in answers for s in a.emulated))
    return RecallAnswer(tuple(merged[: query.limit]), all(a.abstain for a in answers), degraded,
                        emulated), len(memory_ids)
