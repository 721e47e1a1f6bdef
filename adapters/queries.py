"""Named and free queries (UHP Memories §6.4, §6.5): an optional extension of the provider contract.

A provider that can run a statement in its own language against one memory implements
`QueryingProvider` as well as `Provider`, and says so in its capability document (`named_queries`,
`free_query_languages`). The gateway checks `isinstance(provider, QueryingProvider)` (the Protocol is
runtime-checkable) and answers `memory_unsupported` for a provider that does not.

The gateway stores named queries, validates their parameters against the definer's JSON Schema and
checks who may run them; a provider only runs what it is given. Whatever the statement says, the
provider MUST confine it to the one memory named by a means the statement cannot undo (§6.5): the
confinement is the provider's, never a condition left for the statement to include.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from adapters.base import ProviderRejected, Record

# What one run may cost unless the caller bounds it further. The gateway passes its own figures.
DEFAULT_MAX_ROWS = 1000
DEFAULT_MAX_SECONDS = 1.0


class QueryParamError(ProviderRejected):
    """A parameter the statement needs is missing or cannot be bound; `param` names it."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class QueryCheck:
    """What a provider learned from a statement without running it: the parameters it names."""

    parameters: tuple[str, ...]


@dataclass(frozen=True)
class QueryResult:
    """One run's answer: `records` when the result is records of the memory, else `columns` and `rows`.

    Row values are JSON scalars (str, int, float, bool, None) so the gateway can send them as they are.
    `degraded` names every bound the run hit (`"query:rows_capped_at_1000"`, `"query:time_limit_1s"`):
    a result cut short is never presented as whole.
    """

    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    records: tuple[Record, ...] | None = None
    degraded: tuple[str, ...] = ()

    @property
    def is_records(self) -> bool:
        return self.records is not None


@runtime_checkable
class QueryingProvider(Protocol):
    """A provider that runs named and free queries, each confined to one memory."""

    def query_languages(self) -> tuple[str, ...]:
        """The languages a named query's body may be written in."""
        ...

    def query_schema(self, language: str) -> str:
        """What a statement in `language` sees of a memory, as text an agent can read (§6.5: the tool
        `memory_query` names the language and the memory's schema)."""
        ...

    async def check_query(self, language: str, statement: str) -> QueryCheck:
        """Compile without running: ProviderRejected when the statement is not one this provider would
        run (not a single read, not valid, reaching outside what it may read); else its parameters."""
        ...

    async def run_named(
        self,
        memory_id: str,
        language: str,
        body: str,
        params: Mapping[str, Any],
        *,
        max_rows: int = DEFAULT_MAX_ROWS,
        max_seconds: float = DEFAULT_MAX_SECONDS,
    ) -> QueryResult:
        """Run a named query's body with parameters already validated by the gateway."""
        ...

    async def run_free(
        self,
        memory_id: str,
        language: str,
        statement: str,
        params: Mapping[str, Any],
        *,
        max_rows: int = DEFAULT_MAX_ROWS,
        max_seconds: float = DEFAULT_MAX_SECONDS,
    ) -> QueryResult:
        """Run a caller's statement. It reads; a provider that lets one write declares
        `free_query_write` and the gateway then asks for `write` as well."""
        ...
