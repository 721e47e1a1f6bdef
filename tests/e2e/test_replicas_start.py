"""Starting `memfed serve`: replicas started together on one empty PostgreSQL all come up with one first
admin, and a start that cannot work exits with one line and a non-zero status instead of hanging."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests._postgres import fresh_schema
from tests.e2e._process import ServeProcess, free_port, memfed_command

pytestmark = pytest.mark.e2e

SHOWN_ONCE = re.compile(r"its API key \(shown once\): (\S+)")


def _config(tmp_path: Path, name: str, schema: str) -> Path:
    (tmp_path / name).mkdir()
    path = tmp_path / name / "memfed.toml"
    path.write_text(f'[state]\nurl = "postgresql://postgres@127.0.0.1:5432/test"\nschema = "{schema}"\n')
    return path


@pytest.mark.postgres
async def test_two_replicas_started_at_once_on_an_empty_postgres_both_come_up_with_one_admin(
    tmp_path: Path,
) -> None:
    """Three trials, each on a schema of its own: two processes started in the same instant both serve,
    the database holds exactly one member (the first admin), exactly one of them printed its key, and that
    key is honoured by both."""
    for trial in range(3):
        async with fresh_schema(f"replicas{trial}") as (engine, schema):
            configs = [_config(tmp_path, f"t{trial}-{side}", schema) for side in "ab"]
            servers = [ServeProcess(config.parent / "data", wait=False, config=config) for config in configs]
            try:
                for server in servers:
                    server.wait_ready(seconds=120)
                outputs = [server.output() for server in servers]
                keys = [m.group(1) for out in outputs for m in SHOWN_ONCE.finditer(out)]
                assert len(keys) == 1, outputs
                for server in servers:
                    me = httpx.get(server.base_url + "/v1/members/me", timeout=10,
                                   headers={"Authorization": f"Bearer {keys[0]}"})
                    assert me.status_code == 200 and me.json()["admin"] is True, me.text
            finally:
                for server in servers:
                    server.stop()
            async with engine.connect() as conn:
                members = (await conn.execute(sa.text(f'SELECT count(*) FROM "{schema}".members'))).scalar_one()
            assert members == 1


def _serve_until_exit(tmp_path: Path, config: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "memfed.toml"
    path.write_text(config)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMFED_")}
    # The bound: a start that fails must end by itself, well before this (a hang fails the test).
    return subprocess.run([*memfed_command(), "serve", "--config", str(path), "--port", str(free_port()),
                           "--data-dir", str(data_dir)],
                          capture_output=True, text=True, timeout=60, env=environment)


def test_a_start_whose_state_store_cannot_be_reached_exits_in_one_line(tmp_path: Path) -> None:
    """A PostgreSQL URL where nothing listens: exit 2, one line naming the state store, the password in the
    URL never printed, no traceback."""
    done = _serve_until_exit(tmp_path, f'[state]\nurl = "postgresql://memfed:pw-SECRET-9@127.0.0.1:{free_port()}/x"\n',
                             tmp_path / "data")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfed: "), done.stderr
    assert "state store" in lines[0] and "pw-SECRET-9" not in done.stderr + done.stdout, lines[0]


def test_a_start_that_fails_after_opening_its_providers_exits_instead_of_hanging(tmp_path: Path) -> None:
    """A second gateway on a data directory whose audit journal the first one holds: the embedded provider
    it had opened is closed again, so the process exits (non-zero, one `memfed:` line naming the journal)
    rather than staying up after the failure."""
    first = ServeProcess(tmp_path / "data", admin_key="mf_e2e_admin_key_for_tests_only_0123456789")
    try:
        done = _serve_until_exit(tmp_path, "", tmp_path / "data")
    finally:
        first.stop()
    assert done.returncode != 0
    reasons = [line for line in done.stderr.splitlines() if line.startswith("memfed: ")]
    assert len(reasons) == 1 and "audit journal" in reasons[0], done.stderr
    assert "Traceback" not in done.stderr


def test_a_port_in_use_stops_the_start_with_status_2_and_closes_what_it_opened(tmp_path: Path) -> None:
    """Another socket listens on the port: the server's one error line says so, the state opened beside it is
    closed again, and the process exits 2 without a traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMFED_")}
        done = subprocess.run([*memfed_command(), "serve", "--port", str(port), "--data-dir", str(tmp_path / "data")],
                              capture_output=True, text=True, timeout=60, env=environment)
    assert done.returncode == 2, done.stderr
    assert "address already in use" in done.stderr and "Traceback" not in done.stderr
