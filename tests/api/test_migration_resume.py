"""Provider swap, when things go wrong (issue item 6): a failure midway changes nothing, a rerun resumes
and leaves no duplicate, and what changes at the source during the copy is carried over."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.base import Capabilities, NewRecord, Provider, ProviderTimeout, ProviderUnavailable, Record, Revision
from gateway.state.migration_schema import migrations
from tests.adapters.fake_mem0 import FakeMem0
from tests.api._gateway import Gateway, make_config, running_gateway
from tests.api.migration_data import aliases, comparable, export_lines, held_by, mem0_gateway, migrate, seed


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Gateway]:
    """A gateway with the default `local` provider and a second local one named `archive`."""
    async with running_gateway(make_config(tmp_path, providers={"archive": {"adapter": "local"}})) as gateway:
        yield gateway


class Flaky:
    """Wraps a provider; makes remember/revise fail once `fail_after` writes have succeeded. With
    `stored_then_timeout` the failing remember is stored first, as a vendor that answered too late."""

    def __init__(self, inner: Provider, fail_after: int, *, stored_then_timeout: bool = False,
                 media: tuple[str, ...] | None = None) -> None:
        self.inner = inner
        self.fail_after = fail_after
        self.writes = 0
        self.stored_then_timeout = stored_then_timeout
        self.media = media
        self.on_write: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def capabilities(self) -> Capabilities:
        caps = self.inner.capabilities()
        return replace(caps, media=self.media) if self.media is not None else caps

    async def _gate(self) -> None:
        if self.on_write is not None:
            hook, self.on_write = self.on_write, None
            await hook()
        if self.writes >= self.fail_after and not self.stored_then_timeout:
            raise ProviderUnavailable("archive is down")
        self.writes += 1

    async def remember(self, memory_id: str, record: NewRecord) -> Record:
        await self._gate()
        written = await self.inner.remember(memory_id, record)
        if self.stored_then_timeout and self.writes > self.fail_after:
            self.stored_then_timeout = False
            self.fail_after = 10**9
            raise ProviderTimeout("archive answered too late")
        return written

    async def revise(self, memory_id: str, record_id: str, revision: Revision) -> Record:
        await self._gate()
        return await self.inner.revise(memory_id, record_id, revision)


def wrap_archive(gw: Gateway, flaky: Flaky) -> None:
    handle = gw.services.providers["archive"]
    handle.provider = flaky


def unwrap_archive(gw: Gateway, flaky: Flaky) -> None:
    handle = gw.services.providers["archive"]
    handle.provider = flaky.inner
    handle.breaker.succeeded()



# --------------------------------------------------------------------------- failure and resume


async def test_a_failure_midway_changes_nothing_and_a_rerun_resumes(gw: Gateway) -> None:
    """The target fails after 3 writes: the answer is 503 with the failed migration's report, the
    memory is still on its provider with every record readable, and no alias exists. Run again, it
    resumes the same migration, and the target ends with each record once, every version once."""
    seeded = await seed(gw)
    before = await export_lines(gw.admin, seeded.memory_id)
    flaky = Flaky(gw.services.providers["archive"].provider, fail_after=3)
    wrap_archive(gw, flaky)
    failed = await migrate(gw, seeded.memory_id)
    assert failed.status_code == 503, failed.text
    error = failed.json()["error"]
    assert error["code"] == "memory_unavailable"
    assert error["detail"]["migration"]["status"] == "failed"
    assert (await gw.admin.get(f"/v1/memories/{seeded.memory_id}")).json()["provider"] == "local"
    assert await aliases(gw, seeded.memory_id) == {}
    assert comparable(await export_lines(gw.admin, seeded.memory_id)) == comparable(before)
    assert 0 < len(await held_by(gw, "archive", seeded.memory_id)) < 4

    unwrap_archive(gw, flaky)
    resumed = await migrate(gw, seeded.memory_id)
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["resumed"] is True
    assert resumed.json()["id"] == error["detail"]["migration"]["id"]
    copies = await held_by(gw, "archive", seeded.memory_id)
    assert len(copies) == 4
    new = await aliases(gw, seeded.memory_id)
    assert sorted(new.values()) == sorted(c.id for c in copies)
    after = await export_lines(gw.admin, seeded.memory_id)
    assert comparable(after, id_map={v: k for k, v in new.items()}) == comparable(before)
    rows = await gw.services.store.rows.fetch_all(migrations, memory_id=seeded.memory_id)
    assert [(r.status, r.copied) for r in rows] == [("completed", 4)]


async def test_a_failure_inside_a_record_resumes_at_its_next_version(gw: Gateway) -> None:
    """A record cut off after some of its versions is finished on the rerun, not written twice."""
    seeded = await seed(gw)
    flaky = Flaky(gw.services.providers["archive"].provider, fail_after=1)  # dana v1 only
    wrap_archive(gw, flaky)
    assert (await migrate(gw, seeded.memory_id)).status_code == 503
    unwrap_archive(gw, flaky)
    assert (await migrate(gw, seeded.memory_id)).status_code == 200
    new = await aliases(gw, seeded.memory_id)
    versions = await gw.services.providers["archive"].provider.history(seeded.memory_id,
                                                                       new[seeded.records["dana"]])
    assert [v.version for v in versions] == [1, 2, 3]


async def test_a_copy_stored_by_a_call_that_timed_out_is_adopted_not_duplicated(gw: Gateway) -> None:
    """A vendor that stores a record and answers too late leaves a copy the log does not know; the
    rerun recognises it as that record's copy and goes on from it."""
    seeded = await seed(gw)
    flaky = Flaky(gw.services.providers["archive"].provider, fail_after=1, stored_then_timeout=True)
    wrap_archive(gw, flaky)
    assert (await migrate(gw, seeded.memory_id)).status_code == 503
    unwrap_archive(gw, flaky)
    rerun = await migrate(gw, seeded.memory_id)
    assert rerun.status_code == 200, rerun.text
    assert rerun.json()["memories"][0]["adopted"] == 1
    assert len(await held_by(gw, "archive", seeded.memory_id)) == 4


async def test_writes_during_the_copy_are_carried_over_before_the_switch(gw: Gateway) -> None:
    """A record written to the source while the copy runs is copied by the catch-up pass, so the switch
    loses nothing."""
    seeded = await seed(gw)
    flaky = Flaky(gw.services.providers["archive"].provider, fail_after=10**9)

    async def late_write() -> None:
        late = await seeded.agent.post(f"/v1/memories/{seeded.memory_id}/records",
                                       json={"type": "fact", "content": "Written during the copy."})
        assert late.status_code == 201

    flaky.on_write = late_write
    wrap_archive(gw, flaky)
    answer = await migrate(gw, seeded.memory_id)
    assert answer.status_code == 200, answer.text
    assert answer.json()["passes"] >= 2
    assert answer.json()["copied"] == 5
    listed = (await gw.admin.get(f"/v1/memories/{seeded.memory_id}/records")).json()["data"]
    assert "Written during the copy." in [r["content"][0]["text"] for r in listed if r["content"]]


async def test_a_record_erased_at_the_source_during_the_copy_is_erased_at_the_target(gw: Gateway) -> None:
    """Erase promises the content cannot be read again: a record erased while it was being copied does
    not come back through the copy."""
    seeded = await seed(gw)
    flaky = Flaky(gw.services.providers["archive"].provider, fail_after=10**9)
    logo = seeded.records["logo"]

    async def erase() -> None:
        # At the second write the pass has read the logo's history already, so its copy is written;
        # the catch-up pass must find it gone at the source and erase the copy.
        flaky.on_write = erase_now

    async def erase_now() -> None:
        done = await gw.admin.post(f"/v1/memories/{seeded.memory_id}/erase", json={"record_ids": [logo]})
        assert done.status_code == 200, done.text

    flaky.on_write = erase
    wrap_archive(gw, flaky)
    answer = await migrate(gw, seeded.memory_id)
    assert answer.status_code == 200, answer.text
    assert answer.json()["copied"] == 3
    assert logo not in await aliases(gw, seeded.memory_id)
    titles = [r.title for r in await held_by(gw, "archive", seeded.memory_id)]
    assert "The logo" not in titles


async def test_a_target_that_cannot_keep_a_file_is_refused_before_anything_is_written(gw: Gateway) -> None:
    """A file of a media type the target does not keep is memory_unsupported up front: no record is
    written there and the binding stays."""
    seeded = await seed(gw)
    flaky = Flaky(gw.services.providers["archive"].provider, fail_after=10**9, media=("text/*",))
    wrap_archive(gw, flaky)
    answer = await migrate(gw, seeded.memory_id)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "memory_unsupported"
    assert "image/png" in answer.json()["error"]["message"]
    assert await held_by(gw, "archive", seeded.memory_id) == []
    assert (await gw.admin.get(f"/v1/memories/{seeded.memory_id}")).json()["provider"] == "local"


# --------------------------------------------------------------------------- through mem0


@pytest.fixture
async def with_mem0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Gateway, FakeMem0]]:
    """The default local provider and `m0`, a mem0 OSS server faked at the HTTP layer."""
    async with mem0_gateway(tmp_path, monkeypatch) as pair:
        yield pair


async def test_mem0_failing_midway_then_a_rerun_leaves_no_duplicate(with_mem0: tuple[Gateway, FakeMem0]) -> None:
    """mem0 answers 500 to the third add: the memory stays on local; the rerun completes and mem0 holds
    each record once."""
    gw, fake = with_mem0
    seeded = await seed(gw)
    adds = {"n": 0, "broken": True}

    def third_add(request: httpx.Request) -> bool:
        if request.method == "POST" and request.url.path == "/memories":
            adds["n"] += 1
            return bool(adds["broken"]) and adds["n"] >= 3
        return False

    fake.fail("500", times=1, when=third_add)
    failed = await migrate(gw, seeded.memory_id, to="m0")
    assert failed.status_code == 503, failed.text
    assert (await gw.admin.get(f"/v1/memories/{seeded.memory_id}")).json()["provider"] == "local"
    adds["broken"] = False
    assert (await migrate(gw, seeded.memory_id, to="m0")).status_code == 200
    held = [m for m in fake.memories.values() if m["user_id"].endswith(seeded.memory_id)]
    assert len(held) == 4
    assert sorted((await aliases(gw, seeded.memory_id)).values()) == sorted("hrec_" + m["id"] for m in held)
