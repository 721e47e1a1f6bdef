"""Operator subcommands of `memfed` that work on the state directly (no server needed)."""

from __future__ import annotations

import argparse


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Subcommands are added here as they are built (migrate, export, import, audit, explain)."""
    del commands
