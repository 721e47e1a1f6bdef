"""What the embedded provider declares it does (UHP Memories §4): its capability document.

Apart from the provider so the document reads on one page; the PostgreSQL provider declares the same
one, since it keeps records and ranks them as this one does.
"""

from __future__ import annotations

from dataclasses import replace

from adapters.base import Capabilities

CAPABILITIES = Capabilities(
    isolation="enforced_filter",
    derivation="none",
    signals=("query", "text", "filters"),
    emulated_signals=("query",),
    abstain=True,
    keeps_episodes=True,
    observe_answers="records",
    history_content="versions",
    history_structure="versions",
    revise="native",
    forget="native",
    erase_unreachable="reported",
    as_of=True,
    named_queries=True,
    free_query_languages=("sql",),
    free_query_write=False,
    consolidate="runs",
    types=True,
    graph_entities="stated",
    media=("text/*", "image/*", "application/pdf", "audio/*", "video/*"),
    bytes="referenced",
    searches_many_memories=True,
    data_location="gateway",
)

# With the sentence-embedding model loaded (memfed[semantic]), `query` is answered by meaning.
SEMANTIC_CAPABILITIES = replace(CAPABILITIES, emulated_signals=())
