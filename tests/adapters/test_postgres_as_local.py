"""The SQLite provider's own tests (tests/adapters/test_local.py) that pin behaviour rather than SQLite,
run unchanged against the PostgreSQL provider: versions, as_of, cursors, words, fusion, filters, erase,
isolation, media and the capability claims. Left out, as SQLite's own: opening a file or `:memory:`,
bytes left in the file or held by another reader after an erase, and the refusal of an attribute key
with a quote (SQLite's JSON path cannot name one; PostgreSQL's can, see test_postgres.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.postgres import PostgresProvider
from tests._postgres import fresh_schema
from tests.adapters.test_local import (  # noqa: F401 - pytest collects them here, with `local` below
    test_a_clock_stepping_back_does_not_break_the_chain,
    test_a_cursor_not_ours_is_refused,
    test_a_file_part_without_its_file_is_refused,
    test_a_filter_only_recall_returns_newest_first,
    test_a_forgotten_record_can_be_revised_back_to_active,
    test_a_recall_without_any_signal_is_refused,
    test_a_record_that_follows_a_source_is_neither_revised_nor_forgotten,
    test_abstain_when_words_were_asked_and_none_matched,
    test_an_undeclared_signal_is_left_out_and_reported,
    test_claims_of_named_and_free_queries,
    test_claims_of_types_and_consolidation_runs,
    test_claims_of_what_local_does_not_do,
    test_concurrent_revisions_form_one_chain,
    test_count_is_active_records_per_memory,
    test_declared_media_are_kept_by_reference,
    test_derivation_none_writes_exactly_what_was_stated,
    test_drop_memory_removes_every_record_of_that_memory_only,
    test_each_filter_op_on_each_field_kind,
    test_episodes_are_kept_and_answered_as_records,
    test_every_field_round_trips_unchanged,
    test_filters_are_anded,
    test_forget_keeps_the_content_and_records_who_forgot,
    test_forgetting_twice_changes_nothing,
    test_fts_operators_in_user_words_are_plain_words,
    test_get_as_of_reads_the_version_current_then,
    test_history_keeps_the_references_of_each_version,
    test_invalidated_at_filter_reads_versions_as_they_stood,
    test_isolation_is_a_filter_every_operation_applies,
    test_list_as_of_shows_the_memory_as_it_stood,
    test_list_cursor_is_stable_under_inserts,
    test_list_with_equal_times_pages_by_id,
    test_naive_instants_are_taken_as_utc,
    test_query_is_emulated_by_words_not_meaning,
    test_recall_as_of_finds_the_words_of_then,
    test_recall_include_all_adds_forgotten_records,
    test_recall_limit_is_honoured,
    test_recall_over_no_memories_finds_nothing,
    test_record_ids_are_hrec_and_32_hex_and_kept_across_versions,
    test_several_signals_are_fused_and_why_names_each,
    test_text_needs_every_word_and_query_any,
    test_text_recall_finds_the_words_a_file_part_carries,
    test_title_words_are_found,
    test_undeclared_media_are_refused_not_stored_without_the_file,
    test_unicode_words_are_found_without_case_or_accents,
    test_unserialisable_attributes_are_refused,
    test_user_words_cannot_inject_fts_syntax,
)

pytestmark = pytest.mark.postgres


@pytest.fixture
async def local() -> AsyncIterator[PostgresProvider]:
    """The provider the imported tests ask for by this name: here, PostgreSQL in a schema of its own."""
    async with fresh_schema("pglocal") as (engine, schema):
        provider = await PostgresProvider.open(engine, schema=schema)
        try:
            yield provider
        finally:
            await provider.close()
