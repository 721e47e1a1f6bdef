"""Every table is registered in gateway/state/tables.py: a fresh store makes them all, whatever was imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# The state store's tables, as the chapter's features need them (the decision log's are the audit's own).
EXPECTED = {
    "members", "api_keys", "groups", "group_members", "memories", "grants", "state_changes", "change_batches",
    "files",
    "file_uses", "snapshots", "idempotency_keys", "record_aliases", "named_queries", "harnesses", "prime_log",
    "observe_outbox", "observe_jobs", "consolidation_runs", "consolidation_changes", "migrations",
    "migration_records",
}

# Run in a fresh interpreter: in this one the test run has long imported every route and schema module.
_OPEN_AND_LIST = """
import asyncio, json, sys
import sqlalchemy as sa
from gateway.state.store import StateStore

async def main(url):
    store = await StateStore.open(url)
    try:
        async with store.engine.connect() as conn:
            names = await conn.run_sync(lambda c: sa.inspect(c).get_table_names())
    finally:
        await store.close()
    loaded = sorted(m for m in sys.modules if m.startswith(("gateway.api", "gateway.migration", "gateway.agent")))
    print(json.dumps({"tables": sorted(names), "loaded": loaded}))

asyncio.run(main(sys.argv[1]))
"""


def test_a_fresh_store_creates_every_table_without_any_route_imported(tmp_path: Path) -> None:
    """StateStore.open alone, no route or migration module imported, makes every table of the state store."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    done = subprocess.run([sys.executable, "-c", _OPEN_AND_LIST, url], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2], check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["loaded"] == []  # the premise: nothing above the state store was imported
    assert set(seen["tables"]) >= EXPECTED, EXPECTED - set(seen["tables"])


def test_the_registry_lists_every_table_on_the_state_metadata() -> None:
    """A table defined on the state store's metadata but left out of TABLES would never be created."""
    import gateway.state  # noqa: F401 - the package and everything it defines
    from gateway.state import tables

    listed = {table.name for table in tables.TABLES}
    assert listed == EXPECTED
    assert set(tables.metadata.tables) == listed
