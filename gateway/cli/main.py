"""The `memfed` command: serve the gateway, and the operator's tools that act on its state directly."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from gateway import __version__
from gateway.base.config import ConfigError
from gateway.cli import audit as audit_commands
from gateway.cli import import_tree as import_tree_commands
from gateway.cli import migrate as migrate_commands
from gateway.cli._common import common, load_config
from gateway.state.tree_check import StateCorrupt


def serve(args: argparse.Namespace) -> int:
    from gateway.audit.seal import Seal
    from gateway.federation.preflight import check_providers
    from gateway.server.serve import run

    config = load_config(args)
    Seal.from_env(config.audit_seal_env)  # a named seal key that is not set stops the start, with a message
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # Before the server: a provider that cannot be opened stops the start with one line (exit 2); one that
    # does not answer is warned about here, once, and the gateway starts anyway.
    check_providers(config)
    # The access log prints request lines only; bearer credentials travel in headers, never logged.
    return run(config)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memfed", description="A UHP Memories gateway.")
    parser.add_argument("--version", action="version", version=f"memfed {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser("serve", help="run the gateway")
    common(serve_parser)
    serve_parser.add_argument("--host", help="address to listen on (127.0.0.1)")
    serve_parser.add_argument("--port", type=int, help="port to listen on (8080)")
    serve_parser.set_defaults(func=serve)
    # The operator's subcommands act on the state directly (no server needed), each group in its module.
    audit_commands.add_commands(commands)
    migrate_commands.add_commands(commands)
    import_tree_commands.add_commands(commands)  # this one talks to a running gateway over HTTP
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from gateway.audit.seal import AuditLogRefused

    try:
        result: int = args.func(args)
    except (ConfigError, AuditLogRefused, StateCorrupt) as exc:
        print(f"memfed: {exc}", file=sys.stderr)
        return 2
    return result


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
