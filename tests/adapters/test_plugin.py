"""The plugin adapter against the fake plugin subprocess (tests/adapters/fake_plugin.py): both error forms,
crashes and restarts, slow answers, the broker callback, the kernel's duties (unique slugs, [[links]]),
Configure against the plugin's ConfigSchema, and the budgeted context recall."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from adapters.base import (
    ProviderError,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnavailable,
    RecordNotFound,
    Unsupported,
)
from adapters.plugin import PluginProvider
from adapters.plugin._kernel import estimate
from adapters.plugin._pb import memory_pb2 as pb
from tests.adapters.fake_plugin import plugin_options, plugin_provider
from tests.adapters.harnesses import M1, M2, Stamps

# reason the fake is asked for -> what memfed makes of it
EXPECTED: dict[str, type[Exception]] = {
    "not_found": RecordNotFound,
    "invalid_type": ProviderRejected,
    "invalid_scope": ProviderRejected,
    "budget_exceeded": ProviderRejected,
    "ratification_unsupported": Unsupported,
    "source_unavailable": ProviderUnavailable,
    "unknown": ProviderUnavailable,
}


async def until(check: object, what: str) -> None:
    """Wait for a background change (a restart) by polling; bounded, so a broken one fails, not hangs."""
    for _ in range(600):
        if callable(check) and check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


@pytest.mark.parametrize("form", ["errorinfo", "memoryerror", "both", "code"])
async def test_each_error_form_maps_onto_memfeds_provider_errors(tmp_path: Path, form: str) -> None:
    """ErrorInfo reasons (the Go SDK's form), MemoryError categories (the protos' form), both, or a bare
    status code: NOT_FOUND is a record not found, INVALID_ARGUMENT and budget_exceeded are refusals,
    ratification_unsupported is unsupported, UNAVAILABLE and INTERNAL are ill health. Each message names
    the provider; with details the reason is named too."""
    async with plugin_provider(tmp_path, "--errors", form) as provider:
        _, memory = provider._supervisor.memory()
        for reason, expected in EXPECTED.items():
            with pytest.raises(Exception) as caught:
                await memory.call("GetRecord", pb.GetRecordRequest(id=f"fail-{reason}"), pb.GetRecordResponse)
            assert type(caught.value) is expected, reason
            assert str(caught.value).startswith("plugin provider notes: GetRecord failed (")
            assert str(caught.value).endswith(": 'asked to fail'"), "the plugin's words are quoted"
            if form != "code":
                assert reason in str(caught.value)


async def test_a_plugin_that_crashes_is_restarted_and_its_records_are_read_again(
    tmp_path: Path, stamps: Stamps
) -> None:
    """The plugin dies after a call: the next call fails at once with ProviderUnavailable naming the
    provider (the breaker's input), the supervisor starts it again and configures it, and the records
    it kept are read as before."""
    async with plugin_provider(tmp_path, "--crash-after", "12", restart={"backoff": 0.05}) as provider:
        written = await provider.remember(M1, stamps.record("Acme renews in March."))
        plugin = provider._supervisor.plugin
        assert plugin is not None
        with pytest.raises(ProviderError):  # a call of the plugin's last turn: it exits while answering
            for _ in range(20):
                await provider.get(M1, written.id)
        await plugin.proc.wait()
        with pytest.raises(ProviderUnavailable) as caught:
            await provider.get(M1, written.id)
        assert "plugin provider notes" in str(caught.value)
        await until(lambda: provider._supervisor.state() == "running", "the restart")
        assert provider._supervisor.restarts == 1
        assert (await provider.get(M1, written.id)).content == written.content


async def test_a_plugin_that_crashes_in_a_loop_is_given_up_on_in_one_line(tmp_path: Path, stamps: Stamps) -> None:
    """Once the plugin crashes at every start, memfed tries `max_restarts` times with backoff, then stops
    and says so in one line naming the provider; calls never hang meanwhile."""
    marker = tmp_path / "crash-now"
    restart = {"max_restarts": 2, "backoff": 0.05, "backoff_max": 0.1}
    async with plugin_provider(tmp_path, "--crash-at-start-if", str(marker), restart=restart) as provider:
        plugin = provider._supervisor.plugin
        assert plugin is not None
        marker.write_text("")
        plugin.proc.kill()
        await until(lambda: "not restarted again" in provider._supervisor.state(), "giving up")
        with pytest.raises(ProviderUnavailable) as caught:
            await provider.list(M1)
        said = str(caught.value)
        assert said.startswith("plugin provider notes failed to restart 2 times in a row")
        assert "exited (code 2) before its handshake" in said and "\n" not in said


async def test_a_slow_plugin_times_out_as_a_timeout_naming_the_provider(tmp_path: Path) -> None:
    """An answer later than `timeout` is ProviderTimeout (DEADLINE_EXCEEDED), which feeds the breaker."""
    async with plugin_provider(tmp_path, "--slow", "3", "--slow-methods", "Recall", timeout=0.3) as provider:
        with pytest.raises(ProviderTimeout) as caught:
            await provider.context(M1, 1000)
        assert "plugin provider notes: Recall failed (DEADLINE_EXCEEDED" in str(caught.value)


async def test_the_plugin_counts_tokens_through_the_broker_with_memfeds_estimate(
    tmp_path: Path, stamps: Stamps
) -> None:
    """A plugin that fills MemoryRecord.tokens calls CountTokens back through the broker: memfed answers
    with its estimate (utf-8 bytes / 4, exact: false), and the tokens come back on a context recall."""
    text = "Acme renews in March and wants its discount kept."
    async with plugin_provider(tmp_path, "--count-tokens") as provider:
        await provider.remember(M1, stamps.record(text))
        assert provider.describe()["tokens_counted"] == 1
        [(record, relevance, tokens)] = await provider.context(M1, 1000)
    assert record.content[0].text == text
    assert tokens == estimate([text]) == 13
    assert 0.0 <= relevance <= 1.0


async def test_records_of_one_title_get_distinct_slugs_as_the_kernel_must(tmp_path: Path, stamps: Stamps) -> None:
    """The plugin overwrites an id it already holds; memfed probes and suffixes (-2) so two records of one
    title in one memory are both kept, and a record of another memory never shares a slug."""
    async with plugin_provider(tmp_path) as provider:
        one = await provider.remember(M1, stamps.record("First.", title="User role"))
        two = await provider.remember(M1, stamps.record("Second.", title="User role"))
        other = await provider.remember(M2, stamps.record("Elsewhere.", title="User role"))
        slugs = [(await provider._ledger.get(r.id)).slug for r in (one, two, other)]
        assert slugs[0].endswith("-user-role") and slugs[1] == slugs[0] + "-2"
        assert slugs[2] != slugs[0] and not slugs[2].startswith(slugs[0].split("-")[0] + "-")
        assert [(await provider.get(M1, r.id)).content[0].text for r in (one, two)] == ["First.", "Second."]


async def test_links_in_the_text_become_references_and_dangling_ones_are_kept(
    tmp_path: Path, stamps: Stamps
) -> None:
    """[[name]] naming a record of the memory (by the plugin's slug) is a reference to it; a name of no
    record is not refused and is kept as a dangling link."""
    async with plugin_provider(tmp_path) as provider:
        target = await provider.remember(M1, stamps.record("Dana is the account owner.", title="Account owner"))
        slug = (await provider._ledger.get(target.id)).slug
        linking = await provider.remember(M1, stamps.record(f"Ask [[{slug}]] first; see [[renewal-plan]]."))
        assert [(r.memory_id, r.record_id, r.rel) for r in linking.references] == [(M1, target.id, "links")]
        entry = await provider._ledger.get(linking.id)
        assert entry is not None and entry.dangling == ("renewal-plan",)


async def test_a_record_the_kernel_wrote_straight_to_the_plugin_is_in_no_memory(
    tmp_path: Path, stamps: Stamps
) -> None:
    """The plugin also holds records memfed never wrote: they are in no memory, so no read shows them."""
    async with plugin_provider(tmp_path) as provider:
        mine = await provider.remember(M1, stamps.record("Mine."))
        _, memory = provider._supervisor.memory()
        await memory.call("Record", pb.RecordRequest(type=pb.MEMORY_TYPE_USER, scope=pb.MEMORY_SCOPE_GLOBAL,
                                                     title="Written by a kernel", content=[
                                                         pb.ContentBlock(text=pb.TextBlock(text="Mine."))]),
                          pb.RecordResponse)
        assert [r.id for r in (await provider.list(M1)).items] == [mine.id]
        assert await provider.count([M1]) == {M1: 1}


async def test_configure_gets_the_schema_checked_table_with_the_secret_from_its_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Configure receives the config table decoded per the plugin's ConfigSchema: defaults filled from
    default_json, the sensitive field read from the variable it names."""
    monkeypatch.setenv("NOTES_TOKEN", "tok-123")
    dump = tmp_path / "config.json"
    config = {"root": "/srv/notes", "api_token": {"env": "NOTES_TOKEN"}, "tags": ["a"]}
    async with plugin_provider(tmp_path, "--config-dump", str(dump), config=config):
        pass
    assert json.loads(dump.read_text()) == {"root": "/srv/notes", "api_token": "tok-123", "tags": ["a"],
                                            "max_records": 1000.0}


@pytest.mark.parametrize(("options", "said"), [
    ({"config": {"root": "/x", "colour": "red"}}, "config.colour is not in the plugin's ConfigSchema"),
    ({"config": {}}, "config.root is required by the plugin's ConfigSchema"),
    ({"config": {"root": 3}}, "config.root must be a string"),
    ({"config": {"root": "/x", "api_token": "tok-in-the-file"}}, "config.api_token is sensitive: name an"),
    ({"types": {"fact": "user"}, "scope": "session"}, None),
])
async def test_a_config_the_plugin_cannot_take_is_refused_at_start_in_one_line(
    tmp_path: Path, options: dict[str, object], said: str | None
) -> None:
    """A key the schema lacks, a missing required one, a wrong type, or a secret written in the file:
    the provider does not open, one line names it (and never the value). A valid table opens."""
    table = plugin_options(tmp_path, "--scopes", "session,project", **options)
    data_dir = tmp_path / "notes"
    data_dir.mkdir()
    async with httpx.AsyncClient() as client:
        if said is None:
            opened = await PluginProvider.from_config(table, client=client, data_dir=data_dir, api_key=None)
            await opened.close()
            return
        with pytest.raises(ValueError) as caught:
            await PluginProvider.from_config(table, client=client, data_dir=data_dir, api_key=None)
    assert str(caught.value).startswith(f"plugin provider notes: {said}")
    assert "tok-in-the-file" not in str(caught.value)


async def test_a_type_mapped_onto_a_memory_type_the_plugin_lacks_is_refused_at_start(tmp_path: Path) -> None:
    """The plugin declares exactly which MemoryTypes it keeps; a mapping onto another is a start error."""
    with pytest.raises(ValueError) as caught:
        async with plugin_provider(tmp_path, "--types", "user,project,reference"):
            pass
    assert str(caught.value) == ("plugin provider notes: types.procedure maps onto MEMORY_TYPE_FEEDBACK, "
                                 "which the plugin does not support")


async def test_a_context_recall_is_the_plugins_budgeted_recall_kept_to_the_memory(
    tmp_path: Path, stamps: Stamps
) -> None:
    """`context` asks the plugin's own Recall with the token budget and keeps this memory's records,
    each with a relevance in [0, 1]; a budget the plugin cannot meet is a refusal, not ill health."""
    async with plugin_provider(tmp_path) as provider:
        mine = await provider.remember(M1, stamps.record("A" * 40))
        await provider.remember(M2, stamps.record("B" * 40))
        got = await provider.context(M1, 1000)
        assert [r.id for r, _, _ in got] == [mine.id]
        assert all(0.0 <= score <= 1.0 for _, score, _ in got)
        with pytest.raises(ProviderRejected):
            await provider.context(M1, 0)


async def test_a_write_whose_answer_was_lost_is_found_by_its_write_id(tmp_path: Path, stamps: Stamps) -> None:
    """Record answers after memfed gave up (a timeout: maybe applied). The ledger entry was written before
    the call, so once the plugin has applied it, find_write finds the record by its write id; a write id
    never sent is not found."""
    async with plugin_provider(tmp_path, "--slow", "1.5", "--slow-methods", "Record", timeout=0.3) as provider:
        new = stamps.record("Acme renews in March.", write_id="hwri_" + "a" * 32)
        with pytest.raises(ProviderTimeout) as caught:
            await provider.remember(M1, new)
        assert caught.value.maybe_applied
        found = None
        for _ in range(100):  # the plugin finishes the write it was sent; bounded so a lost one fails
            found = await provider.find_write(M1, "hwri_" + "a" * 32)
            if found is not None:
                break
            await asyncio.sleep(0.05)
        assert found is not None and found.content == new.content and found.write_id == new.write_id
        assert await provider.find_write(M1, "hwri_" + "b" * 32) is None
        assert [r.id for r in (await provider.list(M1)).items] == [found.id]


async def test_a_write_the_plugin_refused_leaves_nothing_behind(tmp_path: Path, stamps: Stamps) -> None:
    """A Record refused outright (invalid_type: not applied) takes its ledger entry out again."""
    async with plugin_provider(tmp_path) as provider:
        with pytest.raises(ProviderRejected):
            await provider.remember(M1, stamps.record("x", title="fail:invalid_type"))
        assert await provider._ledger.of_memory(M1) == []


def test_without_grpcio_a_plugin_provider_is_one_configuration_error(tmp_path: Path) -> None:
    """grpcio is an optional extra: where it is missing, the face still imports and the factory refuses
    with one line saying what to install (run in a fresh interpreter, where grpc cannot be imported)."""
    script = (
        "import asyncio, pathlib, sys\n"
        "sys.modules['grpc'] = None\n"
        "import adapters.plugin as face\n"
        f"where = pathlib.Path({str(tmp_path)!r})\n"
        "try:\n"
        "    asyncio.run(face.factory({'command': ['x']}, client=None, data_dir=where, api_key=None))\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip() == ("the plugin adapter needs grpcio and protobuf (grpc is missing): "
                                   "pip install 'memfed[plugin]'"), done.stderr


async def test_a_plugin_of_the_first_generation_is_refused_at_start(tmp_path: Path) -> None:
    """A plugin of the first protocol generation (9 RPCs, no ListRecords or GetRecord) cannot give its
    records back: it is refused at start in one line, not on the first read."""
    with pytest.raises(ValueError) as caught:
        async with plugin_provider(tmp_path, "--package", "old", "--first-generation"):
            pass
    assert str(caught.value) == ("plugin provider notes serves no ListRecords/GetRecord (a plugin of the first "
                                 "protocol generation), which memfed needs to read records back")


async def test_the_broker_is_announced_again_before_a_call_that_may_call_back(
    tmp_path: Path, stamps: Stamps
) -> None:
    """A Go plugin keeps a ConnInfo only a few seconds and dials lazily, so an announcement made only at
    start is gone by the first write: memfed sends it again before Record, and CountTokens still reaches
    it long after start (here the fake keeps it 0.2 s and the write comes 1 s later)."""
    async with plugin_provider(tmp_path, "--count-tokens", "--conninfo-ttl", "0.2") as provider:
        await asyncio.sleep(1.0)
        written = await provider.remember(M1, stamps.record("Acme renews in March."))
        assert provider.describe()["tokens_counted"] == 1
        [(record, _, tokens)] = await provider.context(M1, 1000)
    assert record.id == written.id and tokens == estimate(["Acme renews in March."])
