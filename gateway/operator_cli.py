"""Operator subcommands of `memfed` that work on the state directly (no server needed)."""

from __future__ import annotations

import argparse


def add_commands(commands: argparse._SubParsersAction) -> None:
    """The operator's subcommands, each group in its own module."""
    from gateway import cli_audit, cli_migrate

    cli_audit.add_commands(commands)
    cli_migrate.add_commands(commands)
