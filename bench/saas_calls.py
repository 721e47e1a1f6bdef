"""What the SaaS memory adapter asks of the vendor: calls per operation on a memory of N records (a third
revised once, a tenth forgotten), against the fake service in-process, and the time each takes here.

    .venv/bin/python bench/saas_calls.py                 # 500 records
    .venv/bin/python bench/saas_calls.py --records 2000

Prints figures only. A whole-memory read (list, count, the filters list of a recall over fields the
vendor cannot filter on) is one export call whatever N is; a page of a listing reads the whole memory,
so a migration's listing costs N / 100 exports; history walks the chain, one get per version.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.base import Condition, NewRecord, Part, RecallQuery, Revision, Writer
from tests.adapters.fake_saas import FakeSaas, saas_provider

WHO = Writer(kind="member", id="mbr_bench", type="agent")
MEM = "hmem_" + "b" * 32


async def main(records: int) -> None:
    fake = FakeSaas(cap=records * 3)
    async with saas_provider(fake) as saas:
        t0 = datetime(2026, 10, 1, tzinfo=UTC)
        made = []
        for i in range(records):
            new = NewRecord(type="fact", content=(Part(type="text", text=f"Record {i} about account {i % 7}."),),
                            written_by=WHO, written_at=t0 + timedelta(seconds=i), attributes={"account": i % 7})
            made.append(await saas.remember(MEM, new))
        for i, record in enumerate(made):
            if i % 3 == 0:
                await saas.revise(MEM, record.id, Revision(written_by=WHO, written_at=t0 + timedelta(days=1, seconds=i),
                                                           title="revised"))
            if i % 10 == 0:
                await saas.forget(MEM, record.id, WHO, t0 + timedelta(days=2, seconds=i))

        async def measure(name: str, work: object) -> None:
            before = len(fake.requests)
            started = time.perf_counter()
            await work  # type: ignore[misc]
            took = (time.perf_counter() - started) * 1000
            print(f"{name:<44} {len(fake.requests) - before:>6} vendor calls {took:>9.1f} ms")

        print(f"memory of {records} records ({len(fake.records)} vendor records with history)")
        await measure("list, first page of 50", saas.list(MEM))
        await measure("count", saas.count([MEM]))
        await measure("history of a revised record", saas.history(MEM, made[0].id))
        await measure("recall query", saas.recall([MEM], RecallQuery(query="account 3")))
        await measure("recall text", saas.recall([MEM], RecallQuery(text="account")))
        await measure("recall filters (attributes, judged here)",
                      saas.recall([MEM], RecallQuery(filters=(Condition("attributes.account", "eq", 3),))))
        await measure("recall query + filters", saas.recall([MEM], RecallQuery(
            query="account 3", filters=(Condition("attributes.account", "eq", 3),))))

        async def every_page() -> None:
            cursor = None
            while True:
                page = await saas.list(MEM, include="all", limit=100, cursor=cursor)
                if page.next is None:
                    return
                cursor = page.next

        await measure("list include=all, every page of 100", every_page())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500)
    asyncio.run(main(parser.parse_args().records))
