"""The `memfed` command: `serve`, and the operator's subcommands that act on the state directly."""

from gateway.cli.main import main

__all__ = ["main"]
