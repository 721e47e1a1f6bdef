"""The PostgreSQL provider's `x.task` (§8): the SQLite provider's own tests
(tests/adapters/test_local_types.py), run unchanged against it. Both providers declare the capability with
the same code (adapters/local/), which works through each provider's public methods, so the behaviour
is pinned once and run on both."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.postgres import PostgresProvider
from tests._postgres import fresh_schema
from tests.adapters.test_local_types import (  # noqa: F401 - pytest collects them here, with `local` below
    test_a_forgotten_task_is_read_but_not_written,
    test_a_revision_that_breaks_the_schema_is_refused,
    test_an_unregistered_x_type_is_carried_unchanged,
    test_attributes_that_break_the_schema_are_refused,
    test_complete_appends_a_version_and_recall_follows_it,
    test_operations_apply_only_to_their_type_and_their_memory,
    test_recall_finds_a_task_by_its_projection_without_storing_it,
    test_reschedule_checks_its_input_and_moves_the_due_date,
    test_summary_reads_and_writes_nothing,
    test_the_listing_describes_x_task_with_its_schema_projection_and_operations,
)

pytestmark = pytest.mark.postgres


@pytest.fixture
async def local() -> AsyncIterator[PostgresProvider]:
    """The provider the imported tests ask for by this name: here, PostgreSQL in a schema of its own."""
    async with fresh_schema("pgtypes") as (engine, schema):
        provider = await PostgresProvider.open(engine, schema=schema)
        try:
            yield provider
        finally:
            await provider.close()
