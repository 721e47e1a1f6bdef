"""`memfed explain` and `memfed audit verify|export`: the security team's questions, from the command line.

They read the state store and the decision log directly; no running gateway is needed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from gateway.cli._common import common, load_config


def explain(args: argparse.Namespace) -> int:
    from gateway.api.access import explain_document, principals_of
    from gateway.state.store import StateStore

    async def run() -> int:
        config = load_config(args)
        store = await StateStore.open(config.database_url(), search_path=config.state_schema)
        try:
            if not store.tree.exists(args.memory):
                print(f"memfed: no memory {args.memory}", file=sys.stderr)
                return 1
            principals = principals_of(store, args.principal)
            if principals is None:
                print(f"memfed: no principal {args.principal}", file=sys.stderr)
                return 1
            document = explain_document(store, args.memory, args.principal, principals, None)
        finally:
            await store.close()
        if args.json:
            print(json.dumps(document, indent=2))
        else:
            print(render_explanation(document))
        return 0

    return asyncio.run(run())


def render_explanation(document: dict[str, Any]) -> str:
    lines = [f"{document['principal']} on {document['memory_id']}: "
             f"{', '.join(document['privileges']) or 'no privileges (the memory reads as missing)'}"]
    if document["groups"]:
        lines.append(f"  groups: {', '.join(document['groups'])}")
    for grant in document["grants"]:
        origin = "creator's implicit grant" if grant["implicit"] else f"grant {grant['grant_id']}"
        via = f" through {grant['principal']}" if grant["via_group"] else ""
        lines.append(f"  + {', '.join(grant['privileges'])} from {origin} on {grant['memory_id']}{via}")
    if document["cutoff_at"]:
        lines.append(f"  | inheritance stops at restricted memory {document['cutoff_at']}")
    lines.append("  path walked: " + " <- ".join(str(n) for n in document["path"]))
    for privilege, reason in document["reasons"].items():
        lines.append(f"  {privilege}: {reason}")
    return "\n".join(lines)


def add_commands(commands: argparse._SubParsersAction) -> None:

    parser = commands.add_parser("explain", help="why a principal may (or may not) act on a memory")
    common(parser)
    parser.add_argument("memory", help="memory id")
    parser.add_argument("principal", help="member:<id> or group:<id>")
    parser.add_argument("--json", action="store_true", help="print the derivation as JSON")
    parser.set_defaults(func=explain)
    add_audit_commands(commands)


def _open_log(args: argparse.Namespace) -> Any:
    """The log over the state database, not started: reading and verifying need no journal lock, so
    these commands run beside a serving gateway."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from gateway.audit import AuditLog

    config = load_config(args)
    kwargs: dict[str, Any] = {}
    if config.state_schema and config.database_url().startswith("postgresql"):
        kwargs["connect_args"] = {"server_settings": {"search_path": config.state_schema}}
    engine = create_async_engine(config.database_url(), **kwargs)
    from gateway.audit.seal import Seal

    return AuditLog(engine, config.data_dir, seal=Seal.from_env(config.audit_seal_env)), engine


def audit_verify(args: argparse.Namespace) -> int:
    async def run() -> int:
        log, engine = _open_log(args)
        try:
            report = await log.verify()
        finally:
            await engine.dispose()
        if report.ok:
            print(f"audit log intact: {report.checked} entries, hash chain unbroken")
            return 0
        print(f"audit log BROKEN at entry {report.broken_at}: {report.problem} "
              f"({report.checked} entries checked)")
        return 1

    return asyncio.run(run())


def audit_export(args: argparse.Namespace) -> int:
    from gateway.audit import AuditQuery

    async def run() -> int:
        log, engine = _open_log(args)
        filters = AuditQuery(principal=args.principal, memory_id=args.memory, operation=args.operation,
                             decision=args.decision)
        try:
            written = await log.export(sys.stdout, filters)
        finally:
            await engine.dispose()
        print(f"memfed: exported {written} entries", file=sys.stderr)
        return 0

    return asyncio.run(run())


def add_audit_commands(commands: argparse._SubParsersAction) -> None:

    audit = commands.add_parser("audit", help="the decision log: verify its hash chain, export it")
    actions = audit.add_subparsers(dest="audit_command", required=True)
    verify = actions.add_parser("verify", help="check the hash chain; exit 1 and say where it breaks")
    common(verify)
    verify.set_defaults(func=audit_verify)
    export = actions.add_parser(
        "export", help="every entry as NDJSON on stdout, oldest first, each coverage set beside its entry; "
                       "filters keep the entries that are or hold a matching decision (a recall's entry whole)")
    common(export)
    export.add_argument("--principal", help="only entries of this principal (member:<id>)")
    export.add_argument("--memory", help="only entries about this memory")
    export.add_argument("--operation", help="only this operation (e.g. recall.cover)")
    export.add_argument("--decision", choices=("allow", "deny"))
    export.set_defaults(func=audit_export)
