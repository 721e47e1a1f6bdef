"""The embedded provider on PostgreSQL: the local provider's records in the gateway's own database, so
that several gateway instances serve the same records. Named `adapter = "postgres"`; its url defaults to
the gateway's `[state] url`.

`provider` is the adapter; `_connections` its engine, schema setup and write locks, `_schema` its table,
`_sql` its statements (PostgreSQL text search for words).
"""

from adapters.base import AdapterFactory
from adapters.postgres.provider import CAPABILITIES, PostgresProvider

factory: AdapterFactory = PostgresProvider.from_config

__all__ = ["CAPABILITIES", "PostgresProvider", "factory"]
