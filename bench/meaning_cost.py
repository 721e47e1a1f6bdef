"""What each meaning-search model costs: memory once loaded, model time per record and per query.

    nice -n 10 .venv/bin/python bench/meaning_cost.py --records 512 --queries 100 --rounds 3

Memory: each model is loaded in a fresh process and its resident set size read before and after (the
difference is the model, torch's own start-up counted in "before"). Time: both models in this process,
measured in alternating rounds (MiniLM, mpnet, MiniLM, ...) so a noisy neighbour weighs on both alike;
records are LoCoMo turns encoded in batches of 64 as the provider's fill does, queries one at a time as a
recall does. Printed per model: median over rounds of ms per record and ms per query, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from locomo import load

from adapters.local import _embeddings as embeddings

NAMES = ("minilm", "mpnet")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def memory_child(name: str) -> None:
    import sentence_transformers  # noqa: F401  (torch and transformers loaded before the "before" figure)

    before = rss_mb()
    meaning = embeddings.load(name)
    if meaning is None:
        print(json.dumps({"name": name, "missing": True}))
        return
    meaning._model.encode(["warm up"], show_progress_bar=False)
    print(json.dumps({"name": name, "before": before, "after": rss_mb()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=512)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child)
        return
    for name in NAMES:
        out = subprocess.run(
            [sys.executable, __file__, "--memory-child", name], capture_output=True, text=True, check=True
        ).stdout
        got = json.loads(out.strip().splitlines()[-1])
        if got.get("missing"):
            print(f"{name}: not installed")
        else:
            print(
                f"{name}: resident {got['after']:.0f} MB loaded,"
                f" of which the model {got['after'] - got['before']:.0f} MB"
            )
    conv = load("26")
    records = [t.text for t in conv.turns][: args.records]
    queries = [q.text for q in conv.questions][: args.queries]
    models = {n: m for n in NAMES if (m := embeddings.load(n)) is not None}
    per_record: dict[str, list[float]] = {n: [] for n in models}
    per_query: dict[str, list[float]] = {n: [] for n in models}
    for _ in range(args.rounds):
        for name, meaning in models.items():
            model = meaning._model
            began = time.perf_counter()
            model.encode(records, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
            per_record[name].append((time.perf_counter() - began) * 1000 / len(records))
            began = time.perf_counter()
            for q in queries:
                model.encode([q], normalize_embeddings=True, show_progress_bar=False)
            per_query[name].append((time.perf_counter() - began) * 1000 / len(queries))
    for name in models:
        print(
            f"{name}: {statistics.median(per_record[name]):.2f} ms per record (batches of 64),"
            f" {statistics.median(per_query[name]):.2f} ms per query; rounds {args.rounds}"
        )
    if len(models) == 2:
        a, b = NAMES
        print(
            f"{b}/{a}: {statistics.median(per_record[b]) / statistics.median(per_record[a]):.2f}x per record,"
            f" {statistics.median(per_query[b]) / statistics.median(per_query[a]):.2f}x per query"
        )


if __name__ == "__main__":
    main()
