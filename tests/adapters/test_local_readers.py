"""The embedded provider's reader pool: a read goes where no other read is running."""

from __future__ import annotations

from pathlib import Path

from adapters.local._connections import READERS, LocalConnections


async def test_a_read_goes_to_an_idle_reader_not_behind_a_running_one(tmp_path: Path) -> None:
    """While one reader runs a long read (another member's search), every read that stands alone goes to
    an idle reader, one after another: none is queued behind the busy connection."""
    assert READERS >= 2
    connections = await LocalConnections.open(tmp_path / "local.sqlite3")
    try:
        async with connections._reading() as busy:
            used = []
            for _ in range(2 * READERS):
                async with connections._reading() as db:
                    used.append(db)
            assert busy not in used
        # With nothing running, reads take turns over every reader.
        turns = []
        for _ in range(READERS):
            async with connections._reading() as db:
                turns.append(db)
        assert len({id(db) for db in turns}) == READERS
    finally:
        await connections.close()
