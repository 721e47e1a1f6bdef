"""The embedded provider: SQLite + FTS5 in one file, the default that needs nothing else installed.

`provider` is the adapter; `_connections` its SQLite connections, `_schema` and `_sql` its tables and
statements, `queries` and `_query_container` named and free SQL queries, `task_type` the `x.task` type,
`consolidation` its consolidation pass.
"""

from adapters.base import AdapterFactory
from adapters.local.provider import CAPABILITIES, LocalProvider

factory: AdapterFactory = LocalProvider.from_config

__all__ = ["CAPABILITIES", "LocalProvider", "factory"]
