"""A command's standard output is its answer only: with `[telemetry] exporter = "console"`, the spans go
to standard error and `memfed export` still writes clean NDJSON that `memfed import` takes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.api._gateway import make_config, running_gateway
from tests.e2e._process import memfed_command

pytestmark = pytest.mark.e2e


def test_export_with_console_telemetry_writes_only_ndjson_on_stdout(tmp_path: Path) -> None:
    async def seed() -> tuple[str, str]:
        async with running_gateway(make_config(tmp_path)) as gw:
            source = await gw.root("Source")
            for text in ("first words", "second words"):
                made = await gw.admin.post(f"/v1/memories/{source['id']}/records", json={"content": text})
                assert made.status_code == 201
            target = await gw.root("Target")
            return source["id"], target["id"]

    source_id, target_id = asyncio.run(seed())
    config = tmp_path / "memfed.toml"
    config.write_text(f'[server]\ndata_dir = "{(tmp_path / "data").as_posix()}"\n\n[telemetry]\nexporter = "console"\n')
    env = {**os.environ}
    exported = subprocess.run([*memfed_command(), "export", source_id, "--config", str(config)],
                              capture_output=True, text=True, timeout=60, env=env)
    assert exported.returncode == 0, exported.stderr
    lines = exported.stdout.splitlines()
    assert len(lines) == 2 and all(json.loads(line)["memory_id"] == source_id for line in lines), \
        exported.stdout[:500]
    assert '"trace_id"' in exported.stderr  # the spans were made, on standard error
    imported = subprocess.run([*memfed_command(), "import", target_id, "--config", str(config)],
                              input=exported.stdout, capture_output=True, text=True, timeout=60, env=env)
    assert imported.returncode == 0, imported.stderr
