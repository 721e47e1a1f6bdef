"""Recall quality on LoCoMo (../shared/data/locomo): one memory, the sessions dealt to N memories on N
providers, and an in-process BM25 baseline, all scored against the turns each question names as evidence.

    .venv/bin/python bench/locomo.py --conversations all --providers local,local,local --k 10
    .venv/bin/python bench/locomo.py --conversations 26,30 --providers local,mem0 --signal text

Every turn is one record (`"<speaker>: <text>"`, `dia_id` and `session` in attributes), written through an
in-process gateway (httpx.ASGITransport) exactly as a client would. Each question of categories 1-4 is one
recall at the conversation's root. The mem0 provider is the stateful HTTP fake of tests/adapters/fake_mem0.py
(platform variant: word-overlap similarity), so it ranks by its own rule, not by bm25.

Printed per layout: hit@k (some evidence turn in the first k), recall@k (share of evidence turns in the first
k), MRR (1/rank of the first evidence turn, 0 beyond k), nDCG@k (binary gains), and recall latency p50/p99
in milliseconds measured at the client, one recall at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _seed import percentile

from adapters.local._sql import STOPWORDS
from tests.adapters.fake_mem0 import FakeMem0
from tests.api._gateway import Gateway, make_config, running_gateway

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo"
if not DATA.exists():
    DATA = Path("/work/shared/data/locomo")
_DIA = re.compile(r"D\d+:\d+")
_WORD = re.compile(r"[^\W_]+")
DEGRADED: list[str] = []
SEMANTIC = False
SEMANTIC_MODEL = "minilm"


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    text: str


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]
    category: int


@dataclass(frozen=True)
class Conversation:
    name: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


def load(name: str) -> Conversation:
    raw = json.loads((DATA / f"{name}.json").read_text())
    turns: list[Turn] = []
    session = 1
    while f"session_{session}_date_time" in raw:
        for turn in raw.get(f"session_{session}") or []:
            turns.append(Turn(turn["dia_id"], session, f"{turn['speaker']}: {turn['text']}"))
        session += 1
    known = {t.dia_id for t in turns}
    questions = []
    for qa in raw["qa"]:
        if qa.get("category") not in (1, 2, 3, 4):
            continue
        # A few evidence entries are written "D1:3; D1:4" or name a turn that does not exist: keep the real ones.
        evidence = frozenset(d for e in qa.get("evidence", []) for d in _DIA.findall(str(e)) if d in known)
        if evidence:
            questions.append(Question(str(qa["question"]), evidence, int(qa["category"])))
    return Conversation(name, tuple(turns), tuple(questions))


# --------------------------------------------------------------------------- metrics


@dataclass
class Scores:
    hit: float = 0.0
    recall: float = 0.0
    mrr: float = 0.0
    ndcg: float = 0.0
    count: int = 0

    def add(self, ranked: Sequence[str], evidence: frozenset[str], k: int) -> None:
        top = list(ranked[:k])
        found = [i for i, d in enumerate(top) if d in evidence]
        self.hit += 1.0 if found else 0.0
        self.recall += len({top[i] for i in found}) / len(evidence)
        self.mrr += 1.0 / (found[0] + 1) if found else 0.0
        dcg = sum(1.0 / math.log2(i + 2) for i in found)
        ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(evidence))))
        self.ndcg += dcg / ideal
        self.count += 1

    def row(self) -> tuple[float, float, float, float]:
        n = max(self.count, 1)
        return self.hit / n, self.recall / n, self.mrr / n, self.ndcg / n


# --------------------------------------------------------------------------- BM25 baseline


def tokens(text: str) -> list[str]:
    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in STOPWORDS]


def bm25_rank(docs: Sequence[tuple[str, list[str]]], question: list[str], k1: float = 1.2,
              b: float = 0.75) -> list[str]:
    """Okapi BM25 over one conversation's turns; the same tokens the embedded provider's query uses."""
    df: Counter[str] = Counter()
    for _, words in docs:
        df.update(set(words))
    n = len(docs)
    average = sum(len(w) for _, w in docs) / max(n, 1)
    scored = []
    for dia_id, words in docs:
        tf = Counter(words)
        score = 0.0
        for term in set(question):
            if term in tf:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(words) / average))
        if score > 0:
            scored.append((-score, dia_id))
    scored.sort()
    return [d for _, d in scored]


# --------------------------------------------------------------------------- through the gateway


async def seed(gw: Gateway, conv: Conversation, providers: Sequence[str]) -> str:
    """The conversation's root; with one provider the turns are its own, else session s goes to child s mod N."""
    root = await gw.root(f"locomo-{conv.name}-{len(providers)}", provider=providers[0])
    targets = [root["id"]]
    if len(providers) > 1:
        targets = [(await gw.child(gw.admin, root["id"], f"part-{i}", provider=p))["id"]
                   for i, p in enumerate(providers)]
    for turn in conv.turns:
        target = targets[(turn.session - 1) % len(targets)]
        made = await gw.admin.post(f"/v1/memories/{target}/records", json={
            "type": "fact", "content": turn.text,
            "attributes": {"dia_id": turn.dia_id, "session": turn.session}})
        if made.status_code != 201:
            raise SystemExit(f"write failed: {made.status_code} {made.text[:300]}")
    return str(root["id"])


async def ask(gw: Gateway, root_id: str, conv: Conversation, signal: str, k: int, scores: Scores,
              latencies: list[float]) -> None:
    if SEMANTIC:  # the first meaning search embeds every turn: paid here, not inside a measured recall
        started = time.perf_counter()
        warm = await gw.admin.post(f"/v1/memories/{root_id}/recall", json={"query": "warm up", "limit": 1})
        took = time.perf_counter() - started
        print(f"  conversation {conv.name}: {len(conv.turns)} turns embedded in {took:.1f} s"
              f" ({took * 1000 / len(conv.turns):.1f} ms per turn; status {warm.status_code})", file=sys.stderr)
    for q in conv.questions:
        started = time.perf_counter()
        answer = await gw.admin.post(f"/v1/memories/{root_id}/recall", json={signal: q.text, "limit": k})
        latencies.append((time.perf_counter() - started) * 1000)
        if answer.status_code != 200:
            raise SystemExit(f"recall failed: {answer.status_code} {answer.text[:300]}")
        body = answer.json()
        if body["degraded"] and not DEGRADED:
            DEGRADED.extend(body["degraded"])
            print(f"  note: a recall was degraded: {body['degraded']}", file=sys.stderr)
        ranked = [r["record"]["attributes"].get("dia_id", "") for r in body["results"]]
        scores.add(ranked, q.evidence, k)


def provider_tables(names: Sequence[str], root: Path) -> dict[str, Any]:
    tables: dict[str, Any] = {}
    for name in set(names):
        if name.startswith("local"):
            tables[name] = {"adapter": "local", "path": str(root / f"{name}.sqlite3"), "write_settle": 0,
                            # the first meaning search of a conversation embeds all its turns
                            "timeout": 300, "semantic": "on" if SEMANTIC else "off",
                            "semantic_model": SEMANTIC_MODEL}
        elif name.startswith("mem0"):
            tables[name] = {"adapter": "mem0", "variant": "platform", "base_url": "https://api.mem0.ai",
                            "api_key_env": "MEMFED_BENCH_MEM0_KEY"}
        else:
            raise SystemExit(f"unknown provider {name!r}: local*, mem0*")
    return tables


async def layout(conversations: Sequence[Conversation], providers: Sequence[str], signal: str, k: int,
                 scoring: str) -> tuple[Scores, list[float], float]:
    import os

    fake = FakeMem0("platform")
    os.environ["MEMFED_BENCH_MEM0_KEY"] = fake.api_key or ""
    with tempfile.TemporaryDirectory() as tmp:
        tables = provider_tables(providers, Path(tmp))
        # With meaning on, a long deadline: the warm-up recall embeds a whole conversation at once.
        recall = {"scoring": scoring} | ({"deadline": 900} if SEMANTIC else {})
        config = make_config(Path(tmp), providers=tables, recall=recall)
        async with running_gateway(config, http_client=fake.client()) as gw:
            scores, latencies = Scores(), []
            began = time.perf_counter()
            roots = [await seed(gw, conv, providers) for conv in conversations]
            written = time.perf_counter() - began
            for conv, root_id in zip(conversations, roots, strict=True):
                await ask(gw, root_id, conv, signal, k, scores, latencies)
            return scores, latencies, written


def deal(providers: Sequence[str]) -> list[str]:
    """Distinct provider names: `local,local,local` becomes three local instances."""
    seen: Counter[str] = Counter()
    out = []
    for name in providers:
        seen[name] += 1
        out.append(name if seen[name] == 1 else f"{name}{seen[name]}")
    return out


def line(label: str, scores: Scores, latencies: Sequence[float] = ()) -> str:
    hit, rec, mrr, ndcg = scores.row()
    lat = f" {percentile(list(latencies), 0.5):8.1f} {percentile(list(latencies), 0.99):8.1f}" if latencies else ""
    return f"{label:<44} {hit:6.3f} {rec:9.3f} {mrr:6.3f} {ndcg:7.3f}{lat}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", default="all", help="comma-separated file names, or all")
    parser.add_argument("--providers", default="local,local,local",
                        help="one per federated memory: local (an embedded instance each) or mem0 (the fake)")
    parser.add_argument("--signal", default="query", choices=("query", "text"))
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--semantic", action="store_true", help="the embedded providers search by meaning too")
    parser.add_argument("--semantic-model", default="minilm", choices=("minilm", "mpnet"),
                        help="with --semantic: the sentence-embedding model (README, meaning search)")
    parser.add_argument("--scoring", default="uniform,rrf", help="merge methods to compare: uniform, rrf")
    args = parser.parse_args()
    global SEMANTIC, SEMANTIC_MODEL
    SEMANTIC, SEMANTIC_MODEL = args.semantic, args.semantic_model
    names = (sorted(p.stem for p in DATA.glob("*.json")) if args.conversations == "all"
             else args.conversations.split(","))
    conversations = [load(n) for n in names]
    providers = deal(args.providers.split(","))
    total = sum(len(c.questions) for c in conversations)
    print(f"LoCoMo conversations {','.join(names)}: {sum(len(c.turns) for c in conversations)} turns, "
          f"{total} questions (categories 1-4); signal {args.signal}, k {args.k}, "
          f"meaning {'on' if SEMANTIC else 'off'}")
    print(f"{'layout':<44} {'hit@k':>6} {'recall@k':>9} {'MRR':>6} {'nDCG@k':>7} {'p50 ms':>8} {'p99 ms':>8}")
    baseline = Scores()
    for conv in conversations:
        docs = [(t.dia_id, tokens(t.text)) for t in conv.turns]
        for q in conv.questions:
            baseline.add(bm25_rank(docs, tokens(q.text)), q.evidence, args.k)
    print(line("BM25, one index per conversation", baseline))
    for scoring in args.scoring.split(","):
        single, single_lat, single_w = await layout(conversations, providers[:1], args.signal, args.k, scoring)
        print(line(f"[{scoring}] one memory on {providers[0]}", single, single_lat))
        if len(providers) == 1:  # `--providers local`: one memory only, nothing to federate
            continue
        fed, fed_lat, fed_w = await layout(conversations, providers, args.signal, args.k, scoring)
        print(line(f"[{scoring}] {len(providers)} memories on {','.join(providers)}", fed, fed_lat))
        (sh, _, smrr, _), (fh, _, fmrr, _) = single.row(), fed.row()
        print(f"  [{scoring}] federated/single: hit@{args.k} {fh / max(sh, 1e-9):.3f}, MRR {fmrr / max(smrr, 1e-9):.3f}"
              f"; writes {single_w:.1f} s (one memory), {fed_w:.1f} s (federated)")


if __name__ == "__main__":
    asyncio.run(main())
