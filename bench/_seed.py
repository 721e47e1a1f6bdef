"""Seeding for the benches: a root with child memories on the embedded provider and many records.

Records are written straight into the embedded provider (HTTP seeding would time the seeding, not the
thing measured). Words are drawn with Zipf's law from a 5,000-word vocabulary (the k-th most common word
is k times rarer than the first), as words are in real text.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from adapters.base import NewRecord, Part, Writer
from gateway.base.config import from_mapping
from gateway.server.app import bootstrap_admin, open_services

ADMIN_KEY = "mf_bench_admin_key_0123456789abcdef"
VOCABULARY = [f"word{i}" for i in range(5000)]
WEIGHTS = [1.0 / (i + 1) for i in range(5000)]


def words(rng: random.Random, k: int) -> list[str]:
    return rng.choices(VOCABULARY, WEIGHTS, k=k)


@dataclass(frozen=True)
class Seeded:
    root_id: str
    memory_ids: tuple[str, ...]
    seconds: float


async def seed(data_dir: Path, records: int, memories: int, seed_value: int = 7,
               audit: bool = True) -> Seeded:
    """A root and `memories` children under it holding `records` records; the admin key is ADMIN_KEY."""
    rng = random.Random(seed_value)
    config = from_mapping({"audit": {"enabled": audit}}).with_overrides(data_dir=data_dir)
    os.environ["MEMFED_ADMIN_KEY"] = ADMIN_KEY
    services = await open_services(config)
    await bootstrap_admin(services.store, announce=False)
    admin = services.store.member_for_key(ADMIN_KEY)
    assert admin is not None
    root = await services.store.create_memory(name="Root", description="", parent_id=None, restricted=False,
                                              provider="local", created_by=admin.id)
    children = [await services.store.create_memory(name=f"m{i}", description="", parent_id=root.id,
                                                   restricted=False, provider="local", created_by=admin.id)
                for i in range(memories)]
    provider = services.providers["local"].provider
    writer = Writer("member", admin.id, "human")
    started = time.perf_counter()
    for i in range(records):
        memory = children[i % memories]
        text = " ".join(words(rng, 12)) + f" item{i}"
        await provider.remember(memory.id, NewRecord("fact", (Part("text", text=text),), writer,
                                                     datetime.now(UTC), attributes={"n": i % 10}))
    seconds = time.perf_counter() - started
    await services.close()
    return Seeded(root.id, tuple(c.id for c in children), seconds)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
