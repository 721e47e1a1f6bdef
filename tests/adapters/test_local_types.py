"""The local provider's registered type `x.task` (§8): its schema, its operations, and recall through
its text projection."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from adapters.base import NewRecord, Part, ProviderRejected, RecallQuery, RecordNotFound
from adapters.local import LocalProvider
from adapters.operations import TypedProvider, UnknownOperation
from tests.adapters.harnesses import AGENT, M1, M2, PERSON, Stamps


def task(stamps: Stamps, title: str = "Renew the Acme contract", **attributes: object) -> NewRecord:
    attrs = {"status": "open", "due": "2026-10-09", "assignee": "Dana", **attributes}
    return stamps.record("Send the renewal offer.", type="x.task", title=title, attributes=attrs)


async def test_the_listing_describes_x_task_with_its_schema_projection_and_operations(local: LocalProvider) -> None:
    """types() gives x.task: a JSON Schema for its attributes, how its text is made, and three operations,
    each with its input schema and the privilege it needs."""
    assert isinstance(local, TypedProvider)
    [info] = local.types()
    doc = info.document()
    assert doc["type"] == "x.task"
    assert doc["schema"]["type"] == "object" and doc["schema"]["additionalProperties"] is False
    assert set(doc["schema"]["properties"]) == {"status", "due", "assignee"}
    assert doc["schema"]["properties"]["status"]["enum"] == ["open", "done"]
    assert "assignee" in doc["text"]
    assert {op["name"]: op["requires"] for op in doc["operations"]} == {
        "complete": "write", "reschedule": "write", "summary": "read"}
    reschedule = info.operation("reschedule")
    assert reschedule is not None and reschedule.input["required"] == ["due"]
    doc["schema"]["properties"].clear()
    assert info.document()["schema"]["properties"], "a listing is a copy: changing it changes no registration"


@pytest.mark.parametrize("attributes", [
    {"status": "later"}, {"due": "next Tuesday"}, {"due": 1790000000}, {"assignee": ""}, {"colour": "red"},
    {"status": None},
])
async def test_attributes_that_break_the_schema_are_refused(
    local: LocalProvider, stamps: Stamps, attributes: dict[str, object]
) -> None:
    """§8: an x.task's attributes follow its schema; a write that breaks it is refused and nothing is kept."""
    with pytest.raises(ProviderRejected, match="attributes"):
        await local.remember(M1, stamps.record("x", type="x.task", attributes=attributes))
    assert await local.count([M1]) == {M1: 0}


async def test_a_revision_that_breaks_the_schema_is_refused(local: LocalProvider, stamps: Stamps) -> None:
    """The check applies to the version a revision would make, so no broken version is appended; a
    revision that turns a fact into an x.task is checked too."""
    written = await local.remember(M1, task(stamps))
    with pytest.raises(ProviderRejected):
        await local.revise(M1, written.id, stamps.revision(attributes={"status": "someday"}))
    fact = await local.remember(M1, stamps.record("a fact", type="fact", attributes={"colour": "red"}))
    with pytest.raises(ProviderRejected):
        await local.revise(M1, fact.id, stamps.revision(type="x.task"))
    assert len(await local.history(M1, written.id)) == 1 and len(await local.history(M1, fact.id)) == 1


async def test_an_unregistered_x_type_is_carried_unchanged(local: LocalProvider, stamps: Stamps) -> None:
    """§4.1: a type this provider does not register is kept as stated, whatever its attributes."""
    odd = {"status": "later", "nested": {"a": [1, 2]}}
    written = await local.remember(M1, stamps.record("kept", type="x.calendar.event", attributes=odd))
    assert (await local.get(M1, written.id)).attributes == odd


async def test_recall_finds_a_task_by_its_projection_without_storing_it(local: LocalProvider, stamps: Stamps) -> None:
    """§8: recall finds an x.task through its text projection (assignee, status, due), while the record
    itself keeps exactly the content and title that were stated."""
    written = await local.remember(M1, task(stamps))
    await local.remember(M1, stamps.record("Dana is on leave.", type="note", attributes={"assignee": "Dana"}))
    for words in ("Dana", "open", "2026 10 09", "assignee dana renew"):
        answer = await local.recall([M1], RecallQuery(text=words, types=("x.task",)))
        assert [h.record.id for h in answer.hits] == [written.id], words
    got = await local.get(M1, written.id)
    assert got.content == (Part(type="text", text="Send the renewal offer."),)
    # The attributes of any other type are not words: the note is found by its text only.
    assert [h.record.type for h in (await local.recall([M1], RecallQuery(text="assignee"))).hits] == ["x.task"]


async def test_complete_appends_a_version_and_recall_follows_it(local: LocalProvider, stamps: Stamps) -> None:
    """complete writes version 2 with status done, stamped with the caller; recall by "done" finds it and
    by "open" no longer does; completing again appends nothing."""
    written = await local.remember(M1, task(stamps))
    at = stamps.tick()
    outcome = await local.operate(M1, written.id, "complete", {}, PERSON, at)
    assert outcome.result == {"status": "done", "changed": True}
    assert outcome.record is not None
    assert (outcome.record.version, outcome.record.supersedes) == (2, 1)
    assert outcome.record.attributes == {"status": "done", "due": "2026-10-09", "assignee": "Dana"}
    assert outcome.record.written_by == PERSON and outcome.record.time.written_at == at
    assert [h.record.id for h in (await local.recall([M1], RecallQuery(text="done"))).hits] == [written.id]
    assert (await local.recall([M1], RecallQuery(text="open"))).hits == ()

    again = await local.operate(M1, written.id, "complete", {}, PERSON, stamps.tick())
    assert again.record is None and again.result["changed"] is False
    assert len(await local.history(M1, written.id)) == 2


async def test_reschedule_checks_its_input_and_moves_the_due_date(local: LocalProvider, stamps: Stamps) -> None:
    """reschedule takes {due: "YYYY-MM-DD"} and nothing else; it appends a version with the new date."""
    written = await local.remember(M1, task(stamps))
    for bad in ({}, {"due": "soon"}, {"due": 20261012}, {"due": "2026-10-12", "why": "late"}):
        with pytest.raises(ProviderRejected, match="input"):
            await local.operate(M1, written.id, "reschedule", bad, AGENT, stamps.tick())
    moved = await local.operate(M1, written.id, "reschedule", {"due": "2026-10-12"}, AGENT, stamps.tick())
    assert moved.record is not None and moved.record.attributes["due"] == "2026-10-12"
    assert [v.attributes["due"] for v in await local.history(M1, written.id)] == ["2026-10-09", "2026-10-12"]


async def test_summary_reads_and_writes_nothing(local: LocalProvider, stamps: Stamps) -> None:
    """summary answers the one-line projection and whether the task is overdue at the given instant."""
    written = await local.remember(M1, task(stamps))
    early = await local.operate(M1, written.id, "summary", {}, AGENT, datetime(2026, 10, 1, tzinfo=UTC))
    late = await local.operate(M1, written.id, "summary", {}, AGENT, datetime(2026, 10, 10, tzinfo=UTC))
    assert early.record is None
    assert early.result["summary"] == "Renew the Acme contract — status open, due 2026-10-09, assignee Dana"
    assert (early.result["overdue"], late.result["overdue"]) == (False, True)
    assert len(await local.history(M1, written.id)) == 1


async def test_operations_apply_only_to_their_type_and_their_memory(local: LocalProvider, stamps: Stamps) -> None:
    """An operation the record's type does not have, or a record of another type, is UnknownOperation;
    a record of another memory is not found."""
    written = await local.remember(M1, task(stamps))
    fact = await local.remember(M1, stamps.record("A fact.", type="fact"))
    with pytest.raises(UnknownOperation):
        await local.operate(M1, written.id, "delete_everything", {}, AGENT, stamps.tick())
    with pytest.raises(UnknownOperation):
        await local.operate(M1, fact.id, "complete", {}, AGENT, stamps.tick())
    with pytest.raises(RecordNotFound):
        await local.operate(M2, written.id, "complete", {}, AGENT, stamps.tick())
    assert len(await local.history(M1, written.id)) == 1


async def test_a_forgotten_task_is_read_but_not_written(local: LocalProvider, stamps: Stamps) -> None:
    """A write operation does not bring a forgotten task back as a side effect; a read one still answers."""
    written = await local.remember(M1, task(stamps))
    await local.forget(M1, written.id, PERSON, stamps.tick())
    with pytest.raises(ProviderRejected, match="forgotten"):
        await local.operate(M1, written.id, "complete", {}, AGENT, stamps.tick())
    summary = await local.operate(M1, written.id, "summary", {}, AGENT, stamps.tick())
    assert summary.result["status"] == "open"
