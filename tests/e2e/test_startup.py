"""`memfed serve` as a real process: a configuration that cannot work stops it with one line and exit 2;
a provider that does not answer is warned about once and the gateway starts anyway."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.e2e._process import ServeProcess, free_port, memfed_command

pytestmark = pytest.mark.e2e


def serve_until_exit(tmp_path: Path, config: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "memfed.toml"
    path.write_text(config)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMFED_TEST_")}
    return subprocess.run([*memfed_command(), "serve", "--config", str(path), "--port", str(free_port()),
                           "--data-dir", str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=30, env=environment)


@pytest.mark.parametrize(("config", "named"), [
    ('[providers.m0]\nadapter = "mem0"\nvariant = "oss"\nbase_url = "http://127.0.0.1:9"\n'
     'api_key_env = "MEMFED_TEST_UNSET_KEY"\n', ("providers.m0.api_key_env", "MEMFED_TEST_UNSET_KEY")),
    ('[providers.m0]\nadapter = "mem9"\n', ("providers.m0.adapter", "mem9")),
    ('[providers.m0]\nadapter = "mem0"\nvariant = "cloud"\n', ("providers.m0", "variant")),
])
def test_a_configuration_that_cannot_work_stops_the_start_in_one_line(
    tmp_path: Path, config: str, named: tuple[str, str]
) -> None:
    """An unset key variable, an unknown adapter, an option the adapter refuses: exit 2, one line on
    standard error naming the provider and what is wrong, no traceback."""
    done = serve_until_exit(tmp_path, config)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfed: "), done.stderr
    assert all(word in lines[0] for word in named), lines[0]


def test_a_provider_that_does_not_answer_at_start_is_warned_about_once(tmp_path: Path) -> None:
    """A mem0 server that refuses connections: the gateway starts and serves, and says so once."""
    config = tmp_path / "memfed.toml"
    config.write_text(f'[providers.m0]\nadapter = "mem0"\nvariant = "oss"\nbase_url = "http://127.0.0.1:{free_port()}"\n'
                      'api_key_env = "MEMFED_TEST_M0_KEY"\ntimeout = 1.0\n')
    server = ServeProcess(tmp_path / "data", admin_key="mf_e2e_admin_key_for_tests_only_0123456789", config=config,
                          env={"MEMFED_TEST_M0_KEY": "m0-SECRET-startup-key"})
    try:
        assert httpx.get(server.base_url + "/v1/uhp", timeout=5).status_code == 200
        output = server.output()
    finally:
        server.stop()
    warned = [line for line in output.splitlines() if "did not answer at start" in line]
    assert len(warned) == 1 and "m0" in warned[0], output
    assert "Traceback" not in output and "m0-SECRET-startup-key" not in output


def test_a_state_file_that_is_not_a_database_stops_the_start_in_one_line_naming_the_store(tmp_path: Path) -> None:
    """A file of garbage where the SQLite state should be: exit 2, one line that names the state store and
    SQLite's reason (the file is opened by sqlite3 itself, before the engine, to switch it to WAL)."""
    state = tmp_path / "garbage" / "state.sqlite3"
    state.parent.mkdir()
    state.write_bytes(b"not a database, " * 16)
    done = serve_until_exit(tmp_path, f'[state]\nurl = "sqlite:///{state.as_posix()}"\n')
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("memfed: cannot use the state store ") and "file is not a database" in lines[0], lines[0]
