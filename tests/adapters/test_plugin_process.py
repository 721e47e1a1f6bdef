"""Launching a plugin (adapters/plugin/_process.py): the handshake, health, the package choice, the
environment it is given, and the one-line errors for a plugin that cannot be started."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from adapters.plugin._process import Launch, PluginProcess, PluginStartError, parse_handshake

FAKE = str(Path(__file__).with_name("fake_plugin.py"))


def launch(*flags: str, start_timeout: float = 10.0, env: tuple[str, ...] = ()) -> Launch:
    return Launch("notes", (sys.executable, FAKE, *flags), env_names=env, start_timeout=start_timeout)


@pytest.mark.parametrize(("flags", "package"), [
    ((), "pluggableharness.memory.v1"),
    (("--package", "old"), "pluggableharness.agent.memory.v1"),
    (("--network", "tcp"), "pluggableharness.memory.v1"),
])
async def test_a_plugin_is_started_under_the_package_it_serves(flags: tuple[str, ...], package: str) -> None:
    """The handshake is read, the socket (unix or tcp) dialed, health checked, and the memory service found
    under whichever package name the plugin serves; stop goes through the controller and the plugin exits 0."""
    plugin = await PluginProcess.start(launch(*flags))
    try:
        assert plugin.memory is not None and plugin.memory.package == package
        assert len(plugin.capabilities.supported_types) == 4
        # The pre-rename generation has no Describe; the current one names itself.
        assert plugin.producer.name == ("" if "old" in flags else "fake-memory")
    finally:
        await plugin.stop()
    assert plugin.proc.returncode == 0, "Shutdown through the controller lets the plugin exit on its own"


@pytest.mark.parametrize(("flags", "said"), [
    (("--bad-handshake",), "plugin provider notes: bad handshake line: core protocol '2' is not 1"),
    (("--crash-at-start",), "plugin provider notes: exited (code 2) before its handshake"),
    (("--unhealthy",), "plugin provider notes: health check says NOT_SERVING"),
    (("--silent",), "plugin provider notes: printed no handshake within 1 s"),
])
async def test_a_plugin_that_cannot_start_is_one_line_naming_the_provider(flags: tuple[str, ...], said: str) -> None:
    """A bad handshake, a crash, an unhealthy or a silent plugin ends the start with one line, not a hang."""
    with pytest.raises(PluginStartError) as caught:
        # a silent plugin is given 1 s; the others the time a loaded machine takes to import grpc
        await PluginProcess.start(launch(*flags, start_timeout=1.0 if "--silent" in flags else 30.0))
    assert str(caught.value) == said
    assert "\n" not in str(caught.value)


async def test_the_plugin_gets_an_explicit_environment_not_memfeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child sees the cookie, the protocol version, the port range, PATH/HOME/TMPDIR, OTel attributes
    and the variables `env` names; a secret memfed holds and `env` does not name never reaches it."""
    monkeypatch.setenv("MEMFED_ADMIN_KEY", "mf_admin_secret")
    monkeypatch.setenv("NOTES_ROOT", "/srv/notes")
    dump = tmp_path / "env.json"
    plugin = await PluginProcess.start(launch("--env-dump", str(dump), env=("NOTES_ROOT",)))
    await plugin.stop()

    seen = set(json.loads(dump.read_text()))
    assert "MEMFED_ADMIN_KEY" not in seen
    assert {"PLUGGABLEHARNESS_AGENT_PLUGIN", "PLUGIN_PROTOCOL_VERSIONS", "PLUGIN_MIN_PORT", "PLUGIN_MAX_PORT",
            "OTEL_RESOURCE_ATTRIBUTES", "NOTES_ROOT", "PATH"} <= seen
    # Python adds a few of its own (LC_CTYPE on some platforms); nothing else of memfed's comes through.
    assert seen - {"PLUGGABLEHARNESS_AGENT_PLUGIN", "PLUGIN_PROTOCOL_VERSIONS", "PLUGIN_MIN_PORT",
                   "PLUGIN_MAX_PORT", "OTEL_RESOURCE_ATTRIBUTES", "NOTES_ROOT", "PATH", "HOME", "TMPDIR",
                   "LC_CTYPE"} == set()


@pytest.mark.parametrize(("line", "target"), [
    ("1|1|unix|/tmp/plugin123|grpc|\n", "unix:/tmp/plugin123"),
    ("1|1|unix|/tmp/plugin123|grpc", "unix:/tmp/plugin123"),
    ("1|1|tcp|127.0.0.1:10001|grpc|", "ipv4:127.0.0.1:10001"),
])
def test_a_go_plugins_handshake_line_names_its_socket(line: str, target: str) -> None:
    """Six fields as a Go plugin prints them, or five, are accepted."""
    assert parse_handshake(line) == target


@pytest.mark.parametrize("line", [
    "1|1|unix", "1|2|unix|/tmp/p|grpc|", "1|1|unix|/tmp/p", "1|1|unix|/tmp/p|netrpc|",
    "1|1|udp|/tmp/p|grpc|", "1|1|tcp|10.0.0.5:1234|grpc|", "1|1|unix|/tmp/p|grpc|" + "C" * 60,
])
def test_a_handshake_memfed_cannot_honour_is_refused(line: str) -> None:
    """Too few fields, another app version, netrpc (no protocol field), an unknown network, a remote
    address or an AutoMTLS certificate are each refused."""
    with pytest.raises(ValueError):
        parse_handshake(line)
