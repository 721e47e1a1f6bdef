"""What a provider swap costs: records per second from `local` to a second local provider, and the
same for export and import, on a memory of N records (a third revised once, a tenth forgotten).

    .venv/bin/python bench/migrate_copy.py            # 2,000 records
    .venv/bin/python bench/migrate_copy.py --records 10000

Prints figures only. The records are written straight into the provider (not through HTTP) so the
set-up is quick; the timed parts go through gateway/migration/jobs.py exactly as the CLI does.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from adapters.base import NewRecord, Part, Reference, Revision, Writer
from gateway.base.config import from_mapping
from gateway.migration import jobs as migration
from gateway.server.app import open_services

WRITER = Writer("member", "mbr_bench", "agent")


async def main(records: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        config = from_mapping({"providers": {"archive": {"adapter": "local"}}}).with_overrides(
            data_dir=Path(scratch) / "data")
        services = await open_services(config)
        try:
            node = await services.store.create_memory(name="Bench", description="", parent_id=None,
                                                      restricted=False, provider="local", created_by="mbr_bench")
            source = services.providers["local"].provider
            start = datetime(2026, 1, 1, tzinfo=UTC)
            ids: list[str] = []
            for i in range(records):
                at = start + timedelta(seconds=i)
                refs = (Reference(node.id, ids[i - 1], "derived_from"),) if i else ()
                made = await source.remember(node.id, NewRecord(
                    type="fact", content=(Part("text", text=f"fact number {i} about renewal terms"),),
                    written_by=WRITER, written_at=at, title=f"Fact {i}", references=refs))
                ids.append(made.id)
                if i % 3 == 0:
                    await source.revise(node.id, made.id, Revision(WRITER, at + timedelta(milliseconds=5),
                                                                   title=f"Fact {i}, revised"))
                if i % 10 == 0:
                    await source.forget(node.id, made.id, WRITER, at + timedelta(milliseconds=9))
            versions = records + len(range(0, records, 3)) + len(range(0, records, 10))

            began = time.perf_counter()
            lines = [line async for line in migration.export_memory(services, node.id)]
            exported = time.perf_counter() - began
            print(f"export  {records} records ({versions} versions): {exported:.2f} s, "
                  f"{records / exported:,.0f} records/s")

            target = await services.store.create_memory(name="Copy", description="", parent_id=None,
                                                        restricted=False, provider="archive",
                                                        created_by="mbr_bench")
            from gateway.migration.export_format import dumps

            began = time.perf_counter()
            report = await migration.import_records(services, target.id, [dumps(line) for line in lines])
            imported = time.perf_counter() - began
            print(f"import  {report.imported} records ({report.versions_written} versions): {imported:.2f} s, "
                  f"{report.imported / imported:,.0f} records/s")

            began = time.perf_counter()
            swap = await migration.migrate(services, node.id, "archive")
            moved = time.perf_counter() - began
            print(f"migrate {swap.copied} records ({swap.versions_written} versions, {swap.passes} passes): "
                  f"{moved:.2f} s, {swap.copied / moved:,.0f} records/s")

            began = time.perf_counter()
            again = await migration.migrate(services, node.id, "local")
            back = time.perf_counter() - began
            print(f"migrate back (clears the stale copy first): {back:.2f} s, {again.copied / back:,.0f} records/s")
        finally:
            await services.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    asyncio.run(main(parser.parse_args().records))
