"""A process for test_audit_crash to kill: it decides entries into an AuditLog, says "ready", keeps going or waits.

Modes:
  hold    decide --flushed entries and flush them, decide the rest up to --count (journal only: no flush
          interval elapses, no batch wakes the flusher), print "ready", then wait forever.
  stream  decide without end while the flusher commits small batches every few ms; print "ready" once
          --count entries are decided and half as many stored, and carry on deciding until killed.
Request ids are "<prefix>-<n>", n counting from 0, so the test can tell exactly what survived.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from sqlalchemy.ext.asyncio import create_async_engine

from gateway.audit import AuditLog, DecisionEntry


def entry(prefix: str, i: int) -> DecisionEntry:
    return DecisionEntry(
        request_id=f"{prefix}-{i}",
        principal="member:crash",
        groups=("group:ops",),
        operation="recall",
        memory_id=f"hmem_{i % 7}",
        privilege="read",
        allowed=i % 3 != 0,
        reason=f"decision {i}: allowed by grant hgrt_crash on hmem_root" if i % 3 else "refused: no grant",
    )


async def main(args: argparse.Namespace) -> None:
    engine = create_async_engine(args.db)
    if args.schema:
        engine = engine.execution_options(schema_translate_map={None: args.schema})
    data_dir = Path(args.data_dir)
    if args.mode == "hold":
        log = AuditLog(engine, data_dir, flush_interval=3600, batch_size=10**9)
        await log.start()
        for i in range(args.flushed):
            log.decide(entry(args.prefix, i))
        await log.flush()
        for i in range(args.flushed, args.count):
            log.decide(entry(args.prefix, i))
        print("ready", flush=True)
        await asyncio.Event().wait()
    log = AuditLog(engine, data_dir, flush_interval=0.005, batch_size=17)
    await log.start()
    i, said = 0, False
    while True:
        log.decide(entry(args.prefix, i))
        i += 1
        if not said and i >= args.count and log.stats()["stored"] >= args.count // 2:
            print("ready", flush=True)
            said = True
        if i % 5 == 0:
            await asyncio.sleep(0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--schema", default="")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--mode", choices=["hold", "stream"], default="hold")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--flushed", type=int, default=0)
    parser.add_argument("--prefix", default="req")
    asyncio.run(main(parser.parse_args()))
