"""The loop-stall watch: a callback that holds the event loop shows as a stall of at least that long, the
recent figure forgets stalls older than its window, and the figures reach `/metrics` as gauges."""

from __future__ import annotations

import asyncio
import re
import time

from gateway.base.config import from_mapping
from gateway.telemetry import stall
from gateway.telemetry.export import Telemetry
from gateway.telemetry.stall import STALL_SECONDS, StallWatch


async def test_a_callback_blocking_the_loop_shows_as_a_stall_at_least_as_long() -> None:
    """A callback that keeps the loop for 100 ms makes the watch's timer wake at least ~100 ms late: the
    longest and the recent figures say so and the stall is counted; before it, no such stall was seen."""
    watch = StallWatch(every=0.005)
    watch.start()
    try:
        await asyncio.sleep(0.03)
        assert watch.longest < 0.09
        asyncio.get_running_loop().call_soon(time.sleep, 0.1)  # held on purpose
        await asyncio.sleep(0.05)
        assert watch.longest >= 0.09
        assert watch.recent() >= 0.09
        assert watch.stalls >= 1
    finally:
        await watch.stop()


def test_recent_keeps_only_the_window_and_longest_keeps_everything() -> None:
    """The recent figure is the longest lateness of the last `window` seconds; the longest since the start
    and the count of stalls over the target are kept regardless."""
    now = [1000.0]
    watch = StallWatch(window=10.0, clock=lambda: now[0])
    watch.note(0.3)
    now[0] += 4
    watch.note(0.05)
    watch.note(STALL_SECONDS / 2)
    assert watch.recent() == 0.3
    now[0] += 7  # the 0.3 s stall is 11 s old
    assert watch.recent() == 0.05
    now[0] += 20
    assert watch.recent() == 0.0
    assert watch.longest == 0.3
    assert watch.stalls == 2


async def test_stall_figures_are_exported_at_metrics() -> None:
    """With Prometheus metrics on, the watch's figures are the `memfed_loop_stall_*` gauges of /metrics."""
    telemetry = Telemetry(from_mapping({"telemetry": {"metrics": "prometheus"}}))
    watch = StallWatch()
    stall.watching(watch)
    try:
        watch.note(0.25)
        watch.note(0.03)
        text = telemetry.prometheus_text().decode()
    finally:
        stall.watching(None)
        await telemetry.close()
    assert re.search(r"^memfed_loop_stall_max\S* 0\.25$", text, re.M), text
    assert re.search(r"^memfed_loop_stall_recent\S* 0\.25$", text, re.M), text
    assert re.search(r"^memfed_loop_stalls\S* 2\.0$", text, re.M), text
