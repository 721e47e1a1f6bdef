"""One scorer for every provider's candidates: how a federated recall ranks as one index would.

Reciprocal rank fusion alone interleaves the first results of every provider, whatever their strength:
a weak third place on one provider outranks a strong second place on another. Here each provider is asked
for more candidates than the recall's `limit` (`depth`), and the union is scored in the gateway by one
rule that sees every candidate the same way:

- `uniform`: Okapi BM25 of the question over the candidates' own text, with the term statistics taken
  over the union (so a word found in few candidates counts more), divided by the best candidate's, in
  [0, 1]. The gateway keeps no records, so the statistics are those of what the providers returned.
- `prior`: the candidate's place in its own provider's list, (K + 1) / (K + rank), in (0, 1]: whatever
  the provider knows that words do not say (meaning, recency, its own graph) is kept through its order.
- `fused = W * uniform + (1 - W) * prior`, in [0, 1]; with no words to score (a filter-only recall) the
  prior alone.

A provider's raw score is never read: scores of different vendors are not comparable, and one vendor's
garbage (NaN, negative, all equal) must not move another's records. Everything here is a pure function
of the candidates as a set, so the order providers answered in cannot change the answer; ties go to the
uniform score, then the provider's rank, then the key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from adapters.records import Record

Scoring = Literal["uniform", "rrf"]
SCORINGS: tuple[Scoring, ...] = ("uniform", "rrf")
Key = TypeVar("Key", bound=Hashable)

WEIGHT = 0.8  # W: the uniform score's share of `fused`
PRIOR_K = 10  # K: how fast the provider's own order stops mattering
DEPTH_FACTOR = 3
DEPTH_MIN = 30
DEPTH_MAX = 200
BM25_K1 = 1.2
BM25_B = 0.75

_WORD = re.compile(r"[^\W_]+")
_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did", "do", "does", "for",
    "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no", "not",
    "of", "on", "or", "our", "should", "so", "than", "that", "the", "their", "them", "then", "there", "these",
    "they", "this", "to", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will",
    "with", "would", "you", "your",
})


@dataclass(frozen=True)
class Components:
    """Why a result sits where it does: its provider's rank (from 1), the uniform score, the fused one."""

    provider: str
    provider_rank: int
    uniform: float | None
    fused: float

    def as_json(self) -> dict[str, object]:
        return {"provider": self.provider, "provider_rank": self.provider_rank, "uniform": self.uniform,
                "fused": self.fused}


def text_of(record: Record) -> str:
    """The words a record is scored by: its title and its text parts (a file's extracted text included)."""
    return " ".join([record.title or "", *(p.text for p in record.content if p.text)])


def depth(limit: int) -> int:
    """How many candidates to ask each provider for, so the union holds what one index would rank first."""
    return max(limit, min(DEPTH_MAX, max(DEPTH_FACTOR * limit, DEPTH_MIN)))


def _stem(word: str) -> str | None:
    """A lower-cased word as `terms` keeps it: None for a stopword, else with the first of the endings
    ing, ed, es, s cut that leaves more than two letters, unless it ends in ss. Decided by its last
    letter first: most words end in none of g, d, s and are kept after one look."""
    if word in _STOPWORDS:
        return None
    last = word[-1]
    if last == "s":
        if word.endswith("ss"):
            return word
        if len(word) > 4 and word.endswith("es"):
            return word[:-2]
        return word[:-1] if len(word) > 3 else word
    if last == "g":
        return word[:-3] if len(word) > 5 and word.endswith("ing") else word
    if last == "d":
        return word[:-2] if len(word) > 4 and word.endswith("ed") else word
    return word


def terms(text: str, seen: dict[str, str | None] | None = None) -> list[str]:
    """Lower-cased words without stopwords, with the commonest English endings cut so "runs" meets "run".

    `seen` carries each word's stem from one text to the next within a recall: most of the candidates'
    words are a few common ones, so each is cut once. It lives as long as the recall only, so no record's
    words stay in the gateway after it (an erased record's included)."""
    stems: dict[str, str | None] = {} if seen is None else seen
    out = []
    for word in _WORD.findall(text.lower()):
        try:
            stem = stems[word]
        except KeyError:
            stem = stems[word] = _stem(word)
        if stem is not None:
            out.append(stem)
    return out


def bm25(question: Sequence[str], documents: Mapping[Key, Sequence[str]]) -> dict[Key, float]:
    """BM25 of each document against the question, statistics over `documents` alone."""
    count = len(documents)
    if not count:
        return {}
    asked = sorted(set(question))
    wanted = set(asked)
    # Only the asked words are counted: the others weigh in through each document's length alone. Plain
    # dicts, not Counters: a recall scores a few hundred short candidates while its answer waits.
    counts: dict[Key, dict[str, int]] = {}
    frequency = dict.fromkeys(asked, 0)
    for key, words in documents.items():
        tf: dict[str, int] = {}
        for word in words:
            if word in wanted:
                tf[word] = tf.get(word, 0) + 1
        for word in tf:
            frequency[word] += 1
        counts[key] = tf
    average = math.fsum(len(w) for w in documents.values()) / count or 1.0
    idf = {t: math.log(1.0 + (count - frequency[t] + 0.5) / (frequency[t] + 0.5)) for t in asked}
    scores: dict[Key, float] = {}
    for key, words in documents.items():
        if not (tf := counts[key]):
            scores[key] = 0.0  # none of the asked words: the sum of nothing
            continue
        norm = BM25_K1 * (1.0 - BM25_B + BM25_B * len(words) / average)
        scores[key] = math.fsum(idf[t] * tf[t] * (BM25_K1 + 1.0) / (tf[t] + norm) for t in asked if t in tf)
    return scores


def merge(
    question: str | None,
    rankings: Mapping[str, Sequence[Key]],
    texts: Mapping[Key, str],
    *,
    words: Mapping[Key, Sequence[str]] | None = None,
) -> list[tuple[Key, Components]]:
    """The union of every provider's ranking (provider name -> keys best first), best first.

    A key named by two providers keeps its best place (the first list by provider name, on a tie).
    Each candidate's words are `terms` of its text, or given already cut in `words` (the fan-out cuts
    each provider's as its answer comes in).
    """
    placed: dict[Key, tuple[int, str]] = {}
    for provider in sorted(rankings):
        for rank, key in enumerate(rankings[provider], start=1):
            if key not in placed or rank < placed[key][0]:
                placed[key] = (rank, provider)
    asked = terms(question or "")
    uniform: dict[Key, float] | None = None
    if asked:
        seen: dict[str, str | None] = {}
        raw = bm25(asked, {key: words[key] if words is not None and key in words else terms(texts.get(key, ""), seen)
                           for key in placed})
        best = max(raw.values(), default=0.0)
        uniform = {key: (value / best if best > 0 else 0.0) for key, value in raw.items()}
    out: list[tuple[Key, Components]] = []
    for key, (rank, provider) in placed.items():
        prior = (PRIOR_K + 1) / (PRIOR_K + rank)
        u = None if uniform is None else uniform[key]
        fused = prior if u is None else WEIGHT * u + (1.0 - WEIGHT) * prior
        out.append((key, Components(provider, rank, None if u is None else round(u, 6),
                                    round(min(1.0, max(0.0, fused)), 6))))
    out.sort(key=lambda item: (-item[1].fused, -(item[1].uniform or 0.0), item[1].provider_rank,
                               item[1].provider, repr(item[0])))
    return out
