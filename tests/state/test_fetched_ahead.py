"""Reading the next chunk ahead while the current one is turned into nodes: every chunk comes once, in
order; the next is asked for before the current one is handed out; a load stopped midway (an error, a
cancellation) leaves no read of the next chunk running."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from gateway.state.loading import fetched_ahead


class Source:
    """Chunks of numbers, each read taking a turn of the loop; notes which reads began and ended."""

    def __init__(self, chunks: int, gate: asyncio.Event | None = None) -> None:
        self.chunks, self.gate = chunks, gate
        self.began: list[int] = []
        self.finished: list[int] = []
        self.cancelled = 0

    async def parts(self) -> AsyncIterator[Sequence[Any]]:
        for index in range(self.chunks):
            self.began.append(index)
            try:
                await asyncio.sleep(0)
                if self.gate is not None and index > 0:
                    await self.gate.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            self.finished.append(index)
            yield [index * 10 + i for i in range(10)]


async def test_every_chunk_comes_once_in_order_and_the_next_is_asked_first() -> None:
    """The chunks are those of the source in order; when chunk i is handed out, the read of i+1 began."""
    source = Source(5)
    seen: list[int] = []
    async for part in fetched_ahead(source.parts()):
        index = part[0] // 10
        if index + 1 < source.chunks:
            assert index + 1 in source.began
        seen.extend(part)
    assert seen == list(range(50))


async def test_an_error_midway_cancels_the_read_ahead() -> None:
    """The consumer failing on the first chunk (e.g. a broken tree) cancels the read of the next one,
    which would otherwise be left waiting on the driver."""
    source = Source(3, gate=asyncio.Event())  # the second read never finishes on its own
    with pytest.raises(RuntimeError):
        async with contextlib.aclosing(fetched_ahead(source.parts())) as parts:
            async for _part in parts:
                raise RuntimeError("broken")
    assert source.cancelled == 1
    assert source.finished == [0]


async def test_a_cancelled_load_leaves_no_read_running() -> None:
    """A load cancelled while handling a chunk cancels its read ahead; nothing of it runs afterwards."""
    source = Source(3, gate=asyncio.Event())
    handling = asyncio.Event()

    async def load() -> None:
        async with contextlib.aclosing(fetched_ahead(source.parts())) as parts:
            async for _part in parts:
                handling.set()
                await asyncio.sleep(10)

    task = asyncio.create_task(load())
    await handling.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert source.cancelled == 1
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
