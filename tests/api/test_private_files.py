"""What the gateway keeps on disk is its own: files 0600 and directories 0700, whatever the umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.api._gateway import make_config, running_gateway


async def test_state_records_files_and_journal_are_private_under_a_permissive_umask(tmp_path: Path) -> None:
    """Under umask 022 (world-readable by default) the state database, each local provider's records, the
    uploaded files and the decision journal, with the directories holding them, are the gateway user's alone."""
    old = os.umask(0o022)
    try:
        config = make_config(tmp_path, providers={"archive": {"adapter": "local"}})
        async with running_gateway(config) as gw:
            root = await gw.root()
            archive = await gw.root("Archive", provider="archive")
            upload = await gw.admin.post("/v1/files", files={"file": ("a.txt", b"private bytes", "text/plain")})
            file_id = upload.json()["id"]
            for memory in (root, archive):
                made = await gw.admin.post(f"/v1/memories/{memory['id']}/records",
                                           json={"content": [{"type": "file", "file": {"id": file_id}}]})
                assert made.status_code == 201, made.text
            await gw.admin.post(f"/v1/memories/{root['id']}/recall", json={"text": "private"})
            await gw.services.audit.flush()
            seen = sorted((tmp_path / "data").rglob("*"))
            kinds = {p.name for p in seen}
            modes = {str(p.relative_to(tmp_path)): (stat.S_IMODE(p.stat().st_mode), p.is_dir())
                     for p in [tmp_path / "data", *seen]}
            loose = {path: oct(mode) for path, (mode, is_dir) in modes.items() if mode != (0o700 if is_dir else 0o600)}
    finally:
        os.umask(old)
    assert {"state.sqlite3", "records.sqlite3", file_id, "journal-key", "journal-id", "anchor"} <= kinds, kinds
    assert any(name.endswith(".log") for name in kinds) and any(name.endswith("-wal") for name in kinds)
    assert loose == {}
