"""`memfed explain` and `memfed audit verify|anchor|export|seal`: the security team's questions, from the
command line.

They read the state store and the decision log directly; no running gateway is needed (`seal`, which
writes, wants none running).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:

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


def _report(report: Any, anchor: Any = None) -> int:
    if report.ok:
        sealed = f", sealed from entry {report.sealed_from}" if report.sealed_from else ""
        against = f", entry {anchor.seq} as the anchor names it" if anchor is not None and anchor.seq else ""
        print(f"audit log intact: {report.checked} entries, hash chain unbroken{sealed}{against}")
        return 0
    where = f" at entry {report.broken_at}" if report.broken_at is not None else ""
    print(f"audit log BROKEN{where}: {report.problem} ({report.checked} entries checked)")
    return 1


def _anchor(text: str) -> Any:
    """`SEQ:HASH` as `memfed audit anchor` prints it."""
    from gateway.audit.chain import Head
    from gateway.base.config import ConfigError

    seq, _, digest = text.strip().partition(":")
    if not seq.isdigit() or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ConfigError(f"--anchor takes SEQ:HASH as `memfed audit anchor` prints it, not {text!r}")
    return Head(int(seq), digest)


def audit_verify(args: argparse.Namespace) -> int:
    anchor = _anchor(args.anchor) if args.anchor else None

    async def run() -> int:
        log, engine = _open_log(args)
        try:
            report = await log.verify(anchor)
        finally:
            await engine.dispose()
        return _report(report, anchor)

    return asyncio.run(run())


def audit_anchor(args: argparse.Namespace) -> int:
    from gateway.audit.chain import GENESIS

    async def run() -> int:
        log, engine = _open_log(args)
        try:
            report, head = await log.anchor()
        finally:
            await engine.dispose()
        if not report.ok:
            print("memfed: no anchor for a log that does not verify:", file=sys.stderr)
            _report(report)
            return 1
        print(f"{head.seq}:{head.hash}" if head is not None else f"0:{GENESIS}")
        print("memfed: keep this line outside the database (and its backups); `memfed audit verify --anchor "
              "LINE` then shows a log cut, emptied or put back to an earlier copy", file=sys.stderr)
        return 0

    return asyncio.run(run())


def audit_seal(args: argparse.Namespace) -> int:
    """Seal an unsealed log from its next entry on: the operator's decision that what it holds so far is
    what it was (nothing in the database can tell an unsealed log from one whose seals were stripped)."""
    from gateway.audit import store as audit_store
    from gateway.audit.chain import Head
    from gateway.audit.journal import LocalAnchor, take_lock
    from gateway.audit.lines import marker
    from gateway.base.config import ConfigError
    from gateway.state.private_files import private_dir

    async def run() -> int:
        log, engine = _open_log(args)
        if log.seal is None:
            raise ConfigError("memfed audit seal needs the seal key: set [audit] seal_key_env and the variable")
        directory = private_dir(load_config(args).data_dir / "audit-journal")
        try:
            lock = take_lock(directory / "lock")  # a serving gateway would write unsealed entries meanwhile
        except RuntimeError as exc:
            await engine.dispose()
            print(f"memfed: {exc}: stop the gateway first", file=sys.stderr)
            return 1
        try:
            await audit_store.create_audit_tables(engine)
            async with engine.connect() as conn:
                genesis, head = await audit_store.load_genesis(conn), await audit_store.load_head(conn)
            if genesis is not None:
                print(f"memfed: the log is sealed already, from entry {genesis.seq}", file=sys.stderr)
                return 0
            report = await audit_store.verify(engine)
            if not report.ok:
                print("memfed: not sealing a log that does not verify (the seal would vouch for it):",
                      file=sys.stderr)
                return _report(report)
            note = marker("audit.seal_began", f"sealed by an operator from this entry on; the {report.checked} "
                                              "entries before it were written unsealed")
            sealed = await audit_store.append_batch(engine, head or Head(), [note], None, 0, 0, seal=log.seal,
                                                    genesis=True)
            LocalAnchor(sealed.seq, sealed.hash, sealed.seq).write(directory / "anchor")
        finally:
            os.close(lock)
            await engine.dispose()
        print(f"memfed: the log is sealed from entry {sealed.seq} on; entries 1..{sealed.seq - 1} are not sealed",
              file=sys.stderr)
        return 0

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


def add_audit_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:

    audit = commands.add_parser("audit", help="the decision log: verify its hash chain, anchor it, export it")
    actions = audit.add_subparsers(dest="audit_command", required=True)
    verify = actions.add_parser("verify", help="check the hash chain (and seals); exit 1 and say where it breaks")
    common(verify)
    verify.add_argument("--anchor", help="SEQ:HASH from an earlier `memfed audit anchor`: the log must still hold "
                                         "that entry, unchanged")
    verify.set_defaults(func=audit_verify)
    anchor = actions.add_parser("anchor", help="print the verified log's head as SEQ:HASH, to keep outside the "
                                               "database")
    common(anchor)
    anchor.set_defaults(func=audit_anchor)
    seal = actions.add_parser("seal", help="seal a log kept unsealed so far, from its next entry on (gateway "
                                           "stopped, seal key set)")
    common(seal)
    seal.set_defaults(func=audit_seal)
    export = actions.add_parser(
        "export", help="every entry as NDJSON on stdout, oldest first, each coverage set beside its entry; "
                       "filters keep the entries that are or hold a matching decision (a recall's entry whole)")
    common(export)
    export.add_argument("--principal", help="only entries of this principal (member:<id>)")
    export.add_argument("--memory", help="only entries about this memory")
    export.add_argument("--operation", help="only this operation (e.g. recall.cover)")
    export.add_argument("--decision", choices=("allow", "deny"))
    export.set_defaults(func=audit_export)
