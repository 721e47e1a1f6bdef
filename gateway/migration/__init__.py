"""Moving a memory's records: export and import as NDJSON, and the provider swap (`migrate`).

`jobs` holds the three operations the routes and the CLI call; `export_format` the NDJSON line format;
`_replay` writes versions into a provider; `_swap` the order of steps that makes a swap safe to stop and
rerun; `_log` what a migration copied so far.
"""

from gateway.migration.jobs import ImportReport, export_memory, import_records, migrate

__all__ = ["ImportReport", "export_memory", "import_records", "migrate"]
