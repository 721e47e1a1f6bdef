"""A federated recall ranks the union of every provider's candidates by one rule, not by interleaving.

The gateway runs in-process with the embedded provider and a mem0 Platform fake (tests/adapters/
fake_mem0.py) behind a transport that replaces every score mem0 sends with garbage, so a test can tell
that no raw score reaches the order.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from gateway.base.config import Config
from tests.adapters.fake_mem0 import PLATFORM_URL, FakeMem0
from tests.api._gateway import Gateway, make_config, running_gateway

KEY = "m0-platform-SECRET-3333"
QUESTION = "When did Caroline go to the support group meeting?"
STRONG = ("Caroline went to the support group meeting on Sunday",
          "The support group meeting: Caroline spoke first at the group meeting")
WEAK = "Caroline likes pottery"


class GarbageScores:
    """mem0 answers as usual, but every search result claims a huge score, the first the largest."""

    def __init__(self, fake: FakeMem0) -> None:
        self.fake = fake

    async def handle(self, request: httpx.Request) -> httpx.Response:
        answer = await self.fake.respond(request)
        if request.url.path.endswith("/search/") and answer.status_code == 200:
            body = json.loads(answer.content)
            for i, item in enumerate(body.get("results", [])):
                item["score"] = 1e12 - i
            return httpx.Response(200, json=body)
        return answer


async def federated(gw: Gateway) -> str:
    root = await gw.root("Company")
    words = await gw.child(gw.admin, root["id"], "On the embedded provider", provider="local")
    vendor = await gw.child(gw.admin, root["id"], "On mem0", provider="m0")
    for text in STRONG:
        made = await gw.admin.post(f"/v1/memories/{words['id']}/records", json={"type": "fact", "content": text})
        assert made.status_code == 201, made.text
    made = await gw.admin.post(f"/v1/memories/{vendor['id']}/records", json={"type": "fact", "content": WEAK})
    assert made.status_code == 201, made.text
    return str(root["id"])


def config(tmp_path: Path, scoring: str | None = None) -> Config:
    providers = {"m0": {"adapter": "mem0", "variant": "platform", "base_url": PLATFORM_URL,
                        "api_key_env": "TEST_SCORING_MEM0_KEY", "timeout": 2.0}}
    return make_config(tmp_path, providers=providers, **({"recall": {"scoring": scoring}} if scoring else {}))


@pytest.mark.parametrize("scoring", [None, "uniform"])
async def test_a_weak_first_place_elsewhere_does_not_outrank_strong_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scoring: str | None
) -> None:
    """Fails with rank fusion: mem0's only (weak) hit tied the embedded provider's best and came first or
    second. Uniform scoring (the default) puts both strong matches ahead, whatever score mem0 claimed."""
    monkeypatch.setenv("TEST_SCORING_MEM0_KEY", KEY)
    vendor = GarbageScores(FakeMem0("platform", KEY))
    client = httpx.AsyncClient(transport=httpx.MockTransport(vendor.handle))
    async with running_gateway(config(tmp_path, scoring), http_client=client) as gw:
        root_id = await federated(gw)
        answer = await gw.admin.post(f"/v1/memories/{root_id}/recall", json={"query": QUESTION, "limit": 5})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    texts = [r["record"]["content"][0]["text"] for r in results]
    assert texts[-1] == WEAK and set(texts[:2]) == set(STRONG)
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)


async def test_each_result_says_the_components_of_its_score(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`x.memfed`: the provider, its rank there, the uniform score and the fused one, which is `score`."""
    monkeypatch.setenv("TEST_SCORING_MEM0_KEY", KEY)
    vendor = GarbageScores(FakeMem0("platform", KEY))
    client = httpx.AsyncClient(transport=httpx.MockTransport(vendor.handle))
    async with running_gateway(config(tmp_path), http_client=client) as gw:
        root_id = await federated(gw)
        answer = await gw.admin.post(f"/v1/memories/{root_id}/recall", json={"query": QUESTION, "limit": 5})
    results = answer.json()["results"]
    parts = {r["record"]["content"][0]["text"]: r["x.memfed"] for r in results}
    assert parts[WEAK]["provider"] == "m0" and parts[WEAK]["provider_rank"] == 1
    assert {parts[t]["provider"] for t in STRONG} == {"local"}
    assert sorted(parts[t]["provider_rank"] for t in STRONG) == [1, 2]
    for result in results:
        extra = result["x.memfed"]
        assert extra["fused"] == result["score"]
        assert 0.0 <= extra["uniform"] <= 1.0
    assert parts[WEAK]["uniform"] < min(parts[t]["uniform"] for t in STRONG)


async def test_rank_fusion_stays_available_by_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`[recall] scoring = "rrf"`: the old merge, with no score components to show."""
    monkeypatch.setenv("TEST_SCORING_MEM0_KEY", KEY)
    vendor = GarbageScores(FakeMem0("platform", KEY))
    client = httpx.AsyncClient(transport=httpx.MockTransport(vendor.handle))
    async with running_gateway(config(tmp_path, "rrf"), http_client=client) as gw:
        root_id = await federated(gw)
        answer = await gw.admin.post(f"/v1/memories/{root_id}/recall", json={"query": QUESTION, "limit": 5})
    results = answer.json()["results"]
    assert len(results) == 3 and all("x.memfed" not in r for r in results)
    assert WEAK in [r["record"]["content"][0]["text"] for r in results][:2]


def test_an_unknown_scoring_method_stops_the_configuration() -> None:
    """A typo in `[recall] scoring` is said at start, not silently turned into one of the two."""
    from gateway.base.config import ConfigError, from_mapping

    assert from_mapping({}).recall_scoring == "uniform"
    assert from_mapping({"recall": {"scoring": "rrf"}}).recall_scoring == "rrf"
    with pytest.raises(ConfigError, match=r"recall\.scoring"):
        from_mapping({"recall": {"scoring": "bm25"}})
