"""What every `memfed` subcommand shares: the config and data-dir options, and running a coroutine."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from gateway.base.config import Config, load


def load_config(args: argparse.Namespace) -> Config:
    config = load(Path(args.config) if args.config else None)
    return config.with_overrides(
        host=getattr(args, "host", None),
        port=getattr(args, "port", None),
        data_dir=Path(args.data_dir) if args.data_dir else None,
    )


def common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="TOML configuration file (see config.example.toml)")
    parser.add_argument("--data-dir", help="where state and the embedded provider's records live (./.memfed)")


def run_async(main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    return asyncio.run(main())
