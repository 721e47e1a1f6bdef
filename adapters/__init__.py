"""The adapters memfed ships: the contract at the root, one package per vendor.

The contract is `base` (values, `Capabilities`, `Provider`, `AdapterFactory`), `errors`, `records`,
`versioning`, `filters` (memfed's filter semantics, for adapters that judge the records a vendor read
back), `version_format` (a record version as JSON in a vendor's metadata) and the optional extensions
(`consolidation`, `operations`, `queries`). `REGISTRY` is the list of adapters a
`[providers.NAME] adapter = "..."` may name: each entry is the package whose face offers `factory`. It
is imported only when a configured provider names it, so an adapter whose optional dependencies are not
installed costs nothing until it is used. docs/adapters.md says how to add one.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adapters.base import AdapterFactory

REGISTRY: Mapping[str, str] = {
    "local": "adapters.local",
    "mem0": "adapters.mem0",
    "plugin": "adapters.plugin",
    "postgres": "adapters.postgres",
    "saas": "adapters.saas",
    "zep": "adapters.zep",
}


class UnknownAdapter(LookupError):
    """No adapter of that name is registered."""


def factory(name: str) -> AdapterFactory:
    """The factory of the adapter registered as `name`."""
    package = REGISTRY.get(name)
    if package is None:
        raise UnknownAdapter(name)
    made: AdapterFactory = importlib.import_module(package).factory
    return made
