"""`memfed migrate | export | import`: move a memory's records, on the state and providers directly.

These open the gateway's services themselves (no server). A running gateway keeps the tree in memory
and would not see a binding that changed under it: migrate and import with the CLI while the gateway
on that data directory is stopped, or use the HTTP routes (POST /v1/memories/{id}/migrate, .../import,
GET .../export) while it runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TextIO

from adapters.base import ProviderError, RecordNotFound
from gateway.cli._common import common, load_config, run_async
from gateway.migration.export_format import dumps

if TYPE_CHECKING:
    from gateway.services import Services

_STOPPED = ("The gateway on this data directory must be stopped (it keeps the tree in memory and would not see the "
            "change); while it runs, use the HTTP route instead.")


def add_commands(commands: Any) -> None:
    migrate = commands.add_parser(
        "migrate", help="move a memory's records to another provider and switch it there",
        description="Copy every record of MEMORY_ID, every version with its writer and time, to PROVIDER, then "
        "switch the memory to it. Old record ids keep resolving. If it fails, the memory stays where it was "
        "and nothing is lost; running the same command again resumes. The old provider's copy is left in "
        f"place unless --purge-source. {_STOPPED}")
    migrate.add_argument("memory_id", metavar="MEMORY_ID")
    migrate.add_argument("--to", required=True, metavar="PROVIDER", help="a provider named in the configuration")
    migrate.add_argument("--recursive", action="store_true", help="move every memory below MEMORY_ID too")
    migrate.add_argument("--purge-source", action="store_true",
                         help="drop the records at the old provider once the memory is switched")
    common(migrate)
    migrate.set_defaults(func=_migrate)

    export = commands.add_parser(
        "export", help="write a memory's records as NDJSON to standard output",
        description="One record a line with all its versions, forgotten records included: "
        "memfed export MEMORY_ID > file.ndjson")
    export.add_argument("memory_id", metavar="MEMORY_ID")
    common(export)
    export.set_defaults(func=_export)

    import_ = commands.add_parser(
        "import", help="write records from NDJSON on standard input into a memory",
        description="memfed import MEMORY_ID < file.ndjson. Every line is checked before anything is "
        f"written; importing the same file again finishes an import that stopped. {_STOPPED}")
    import_.add_argument("memory_id", metavar="MEMORY_ID")
    common(import_)
    import_.set_defaults(func=_import)


def _with_services(args: argparse.Namespace, work: Callable[[Any], Coroutine[Any, Any, int]]) -> int:
    from gateway.server.app import open_services

    config = load_config(args)

    async def main() -> int:
        services = await open_services(config)
        try:
            return await work(services)
        finally:
            await services.close()

    return run_async(main)


def _fail(message: str, detail: dict[str, Any] | None = None) -> int:
    print(f"memfed: {message}", file=sys.stderr)
    if detail:
        print(json.dumps(detail, indent=2, default=str), file=sys.stderr)
    return 1


class _Bar:
    """A tqdm bar on standard error per pass of the copy (a catch-up pass is usually empty)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.passes = 0
        self.bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        from tqdm import tqdm

        if done == 0:
            self.close()
            self.passes += 1
            label = "copying" if self.passes == 1 else "catching up"
            self.bar = tqdm(total=total, unit="record", desc=label, file=self.stream, leave=True)
        elif self.bar is not None:
            self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _migrate(args: argparse.Namespace) -> int:
    from gateway.migration import jobs as migration

    async def work(services: Services) -> int:
        bar = _Bar(sys.stderr)
        try:
            report = await migration.migrate(services, args.memory_id, args.to, recursive=args.recursive,
                                             purge_source=args.purge_source, progress=bar)
        except migration.CopyError as error:
            bar.close()
            return _fail(error.message, error.detail.get("migration"))
        bar.close()
        print(json.dumps(report.document(), indent=2))
        kept = "left in place" if report.source_kept else "dropped"
        print(f"memfed: {args.memory_id} is now on {args.to}: {report.copied} records copied; the old "
              f"provider's copy is {kept}.", file=sys.stderr)
        return 0

    return _with_services(args, work)


def _export(args: argparse.Namespace) -> int:
    from gateway.migration import jobs as migration

    async def work(services: Services) -> int:
        count = 0
        try:
            async for line in migration.export_memory(services, args.memory_id):
                sys.stdout.write(dumps(line))
                count += 1
        except migration.CopyError as error:
            return _fail(error.message)
        except (ProviderError, RecordNotFound) as exc:
            return _fail(f"the export stopped after {count} records: {exc}")
        sys.stdout.flush()
        print(f"memfed: exported {count} records", file=sys.stderr)
        return 0

    return _with_services(args, work)


def _import(args: argparse.Namespace) -> int:
    from gateway.migration import jobs as migration

    async def work(services: Services) -> int:
        try:
            report = await migration.import_records(services, args.memory_id, sys.stdin)
        except migration.LineError as error:
            return _fail(f"{error}; nothing was imported")
        except migration.CopyError as error:
            return _fail(error.message, error.detail.get("import"))
        print(json.dumps(report.document(), indent=2))
        return 0

    return _with_services(args, work)
