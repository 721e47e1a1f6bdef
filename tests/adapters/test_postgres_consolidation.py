"""The PostgreSQL provider's consolidation runs (§9.2): the SQLite provider's own tests
(tests/adapters/test_local_consolidation.py), run unchanged against it. Both providers declare the capability with
the same code (adapters/local/), which works through each provider's public methods, so the behaviour
is pinned once and run on both."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.postgres import PostgresProvider
from tests._postgres import fresh_schema
from tests.adapters.test_local_consolidation import (  # noqa: F401 - pytest collects them here, with `local` below
    test_a_budget_below_one_is_refused,
    test_a_later_run_leaves_what_a_revert_brought_back,
    test_a_merge_keeps_what_only_the_duplicate_stated,
    test_a_run_never_stops_between_two_records_of_one_instant,
    test_a_run_stops_at_its_budget_and_the_next_resumes_after_through,
    test_changes_are_reported_as_they_are_written,
    test_duplicate_facts_keep_the_oldest_and_forget_the_rest,
    test_every_version_a_run_writes_carries_the_provider_and_the_run,
    test_expired_records_are_forgotten_but_episodes_are_not,
    test_revert_appends_and_history_keeps_both,
    test_revert_forgets_what_a_run_created_and_skips_what_changed_since,
    test_reverting_a_revert_does_the_run_again,
    test_the_kept_fact_is_the_first_written_even_if_revised_since,
)

pytestmark = pytest.mark.postgres


@pytest.fixture
async def local() -> AsyncIterator[PostgresProvider]:
    """The provider the imported tests ask for by this name: here, PostgreSQL in a schema of its own."""
    async with fresh_schema("pgconsolidation") as (engine, schema):
        provider = await PostgresProvider.open(engine, schema=schema)
        try:
            yield provider
        finally:
            await provider.close()
