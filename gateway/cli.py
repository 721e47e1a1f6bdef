"""The `memfed` command: serve the gateway, and the operator's tools that act on its state directly."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from gateway import __version__
from gateway.config import Config, ConfigError, load


def _config(args: argparse.Namespace) -> Config:
    config = load(Path(args.config) if args.config else None)
    return config.with_overrides(
        host=getattr(args, "host", None),
        port=getattr(args, "port", None),
        data_dir=Path(args.data_dir) if args.data_dir else None,
    )


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from gateway.app import create_app
    from gateway.audit_seal import Seal
    from gateway.startup import check_providers

    config = _config(args)
    Seal.from_env(config.audit_seal_env)  # a named seal key that is not set stops the start, with a message
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # Before the server: a provider that cannot be opened stops the start with one line (exit 2); one that
    # does not answer is warned about here, once, and the gateway starts anyway.
    check_providers(config)
    app = create_app(config, freeze_heap=True)
    # The access log prints request lines only; bearer credentials travel in headers, never logged.
    uvicorn.run(app, host=config.host, port=config.port, log_level="info", lifespan="on")
    return 0


def common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="TOML configuration file (see config.example.toml)")
    parser.add_argument("--data-dir", help="where state and the embedded provider's records live (./.memfed)")


def run_async(main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    return asyncio.run(main())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memfed", description="A UHP Memories gateway.")
    parser.add_argument("--version", action="version", version=f"memfed {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser("serve", help="run the gateway")
    common(serve_parser)
    serve_parser.add_argument("--host", help="address to listen on (127.0.0.1)")
    serve_parser.add_argument("--port", type=int, help="port to listen on (8080)")
    serve_parser.set_defaults(func=serve)
    from gateway import operator_cli

    operator_cli.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
    except ConfigError as exc:
        print(f"memfed: {exc}", file=sys.stderr)
        return 2
    return result


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
