"""Configuration: the example file is valid, every commented-out table in it is valid when enabled, and
a vendor key written in the file is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.base.config import ConfigError, from_mapping, load
from gateway.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.toml"


def test_the_example_config_loads_with_its_defaults() -> None:
    """config.example.toml as shipped is the embedded default."""
    config = load(EXAMPLE)
    assert config.default_provider == "local"
    assert list(config.providers) == ["local"]
    assert config.recall_cap == 200 and config.audit_enabled


def test_every_commented_table_of_the_example_is_valid_when_enabled(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """Uncommenting the example's provider and OIDC tables gives a config memfed accepts."""
    enabled = re.sub(r"(?m)^# ?(\[|[a-z_]+ = )", r"\1", EXAMPLE.read_text())
    path = tmp_path / "all.toml"
    path.write_text(enabled)
    config = load(path)
    assert set(config.providers) >= {"local", "mem0-cloud", "mem0-selfhosted", "zep"}
    zep = config.providers["zep"]
    assert (zep.adapter, zep.api_key_env, zep.options["variant"]) == ("zep", "ZEP_API_KEY", "v4")
    notes = config.providers["notes"]
    assert notes.adapter == "plugin" and notes.options["command"] == ["/opt/plugins/notes-memory"]
    assert notes.options["config"]["api_token"] == {"env": "NOTES_TOKEN"}
    cloud = config.providers["mem0-cloud"]
    assert (cloud.adapter, cloud.api_key_env, cloud.options["variant"]) == ("mem0", "MEM0_API_KEY", "platform")
    monkeypatch.setenv("MEM0_API_KEY", "from-the-environment")
    assert cloud.api_key() == "from-the-environment"
    assert config.oidc is not None and config.oidc["issuer"].startswith("https://")
    assert config.state_url is not None and config.state_url.startswith("postgresql://")


def test_a_key_in_the_file_and_unknown_sections_are_refused() -> None:
    """A provider's key belongs in the environment; typos in section names are not ignored."""
    with pytest.raises(ConfigError, match="api_key_env"):
        from_mapping({"providers": {"m": {"adapter": "mem0", "api_key": "secret"}}})
    with pytest.raises(ConfigError, match="unknown config sections"):
        from_mapping({"recal": {"cap": 5}})
    with pytest.raises(ConfigError, match=r"default\.provider"):
        from_mapping({"default": {"provider": "nowhere"}})
    with pytest.raises(ConfigError, match="positive"):
        from_mapping({"recall": {"cap": 0}})


def test_serve_with_a_bad_config_says_why_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """memfed serve refuses a broken config file before it starts, naming the problem."""
    bad = tmp_path / "bad.toml"
    bad.write_text("[providers.x]\nadapter = 'mem0'\napi_key = 'oops'\n")
    assert main(["serve", "--config", str(bad), "--data-dir", str(tmp_path / "d")]) == 2
    assert "api_key_env" in capsys.readouterr().err


def test_write_settle_and_the_claim_lease_are_read_and_checked() -> None:
    """`write_settle` is per provider (defaults: 30 s, 0 for the embedded provider); `[idempotency]
    lease_seconds` is global; a negative or non-number setting is refused, naming the key."""
    config = from_mapping({"idempotency": {"lease_seconds": 4},
                           "providers": {"m0": {"adapter": "mem0", "variant": "oss", "write_settle": 2.5}}})
    assert config.write_lease_seconds == 4.0
    assert config.providers["m0"].settle_seconds() == 2.5
    assert config.providers["local"].settle_seconds() == 0.0
    assert from_mapping({"providers": {"m0": {"adapter": "mem0"}}}).providers["m0"].settle_seconds() == 30.0
    assert "write_settle" not in config.providers["m0"].options
    with pytest.raises(ConfigError, match=r"providers\.m0\.write_settle"):
        from_mapping({"providers": {"m0": {"adapter": "mem0", "write_settle": -1}}})
    with pytest.raises(ConfigError, match="lease_seconds"):
        from_mapping({"idempotency": {"lease_seconds": "soon"}})
