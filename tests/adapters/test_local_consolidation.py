"""The local provider's consolidation pass (§9.2): duplicate facts merged, expired records forgotten, a
budget that stops a run and a resume after `read.through`, and revert by appending."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from adapters.base import NewRecord, ProviderRejected, Record, Reference, Writer
from adapters.consolidation import Change, ConsolidatingProvider, RunOutcome
from adapters.local import LocalProvider
from tests.adapters.harnesses import M1, M2, PERSON, T0, Stamps

RUN = "hcon_" + "a" * 32
RUN_BY = Writer(kind="provider", id="local", consolidation_id=RUN)
REVERT = "hcon_" + "b" * 32
REVERT_BY = Writer(kind="provider", id="local", consolidation_id=REVERT)



def fact(stamps: Stamps, text: str, **fields: Any) -> NewRecord:
    return stamps.record(text, type="fact", **fields)


async def run(local: LocalProvider, stamps: Stamps, *, budget: int | None = None,
              resume_after: datetime | None = None, memory: str = M1, run_id: str = RUN) -> RunOutcome:
    by = Writer(kind="provider", id="local", consolidation_id=run_id)
    return await local.consolidate(memory, run_id, budget=budget, resume_after=resume_after, by=by, at=stamps.tick())


async def active_ids(local: LocalProvider, memory: str = M1) -> set[str]:
    return {r.id for r in (await local.list(memory)).items}


async def test_duplicate_facts_keep_the_oldest_and_forget_the_rest(local: LocalProvider, stamps: Stamps) -> None:
    """Facts equal once case, punctuation and whitespace are set aside are one fact: the oldest stays,
    each younger one is forgotten by the run; a different fact, a note with the same words, and another
    memory's twin are left alone."""
    assert isinstance(local, ConsolidatingProvider)
    kept = await local.remember(M1, fact(stamps, "Acme renews in March."))
    twin = await local.remember(M1, fact(stamps, "acme  RENEWS in march"))
    other = await local.remember(M1, fact(stamps, "Acme renews in April."))
    note = await local.remember(M1, stamps.record("Acme renews in March.", type="note"))
    titled = await local.remember(M1, stamps.record(type="fact", title="Acme renews -- in March!"))
    elsewhere = await local.remember(M2, fact(stamps, "Acme renews in March."))

    outcome = await run(local, stamps)

    assert outcome.status == "completed" and not outcome.budget_exhausted
    assert await active_ids(local) == {kept.id, other.id, note.id}
    assert await active_ids(local, M2) == {elsewhere.id}
    assert set(outcome.changes) == {Change(twin.id, "forgotten", 2), Change(titled.id, "forgotten", 2)}
    assert outcome.read.count == 5 and outcome.read.unit == "records"
    assert outcome.usage["input_tokens"] == 0 == outcome.usage["output_tokens"]


async def test_a_merge_keeps_what_only_the_duplicate_stated(local: LocalProvider, stamps: Stamps) -> None:
    """Attributes and references only the duplicate carried are added to the kept fact in a new version
    (the kept fact's own values win), reported as superseded."""
    ref_a, ref_b = Reference(M1, "hrec_" + "c" * 32, "about"), Reference(M1, "hrec_" + "d" * 32, "about")
    kept = await local.remember(M1, fact(stamps, "Dana leads procurement", attributes={"account": "acme"},
                                         references=(ref_a,)))
    twin = await local.remember(M1, fact(stamps, "Dana leads procurement.", attributes={"account": "quillon",
                                         "source": "call"}, references=(ref_a, ref_b)))

    outcome = await run(local, stamps)

    merged = await local.get(M1, kept.id)
    assert merged.attributes == {"account": "acme", "source": "call"}
    assert merged.references == (ref_a, ref_b)
    assert outcome.changes == (Change(kept.id, "superseded", 2), Change(twin.id, "forgotten", 2))


async def test_the_kept_fact_is_the_first_written_even_if_revised_since(local: LocalProvider,
                                                                        stamps: Stamps) -> None:
    """Oldest means first written: a fact revised after its twin was written is still the one kept."""
    first = await local.remember(M1, fact(stamps, "Kept.", attributes={"a": 1}))
    twin = await local.remember(M1, fact(stamps, "kept"))
    await local.revise(M1, first.id, stamps.revision(attributes={"a": 2}))

    outcome = await run(local, stamps)

    assert outcome.changes == (Change(twin.id, "forgotten", 2),)
    assert await active_ids(local) == {first.id}


async def test_expired_records_are_forgotten_but_episodes_are_not(local: LocalProvider, stamps: Stamps) -> None:
    """A record whose valid_to has passed at the run's now is forgotten; one still valid, one without
    valid_to, and an episode (append-only raw experience) are left."""
    past, future = T0 + timedelta(seconds=1), T0 + timedelta(days=365)
    gone = await local.remember(M1, fact(stamps, "The promo code is SPRING.", valid_to=past))
    note = await local.remember(M1, stamps.record("Offer ends soon.", valid_to=past))
    valid = await local.remember(M1, fact(stamps, "The office is in Leeds.", valid_to=future))
    forever = await local.remember(M1, fact(stamps, "Acme is a customer."))
    episode = await local.remember(M1, stamps.record("Said the code.", type="episode", valid_to=past))

    outcome = await run(local, stamps)

    assert await active_ids(local) == {valid.id, forever.id, episode.id}
    assert {c.record_id for c in outcome.changes} == {gone.id, note.id}
    assert all(c.kind == "forgotten" for c in outcome.changes)


async def test_every_version_a_run_writes_carries_the_provider_and_the_run(local: LocalProvider,
                                                                           stamps: Stamps) -> None:
    """§9.2: what a run writes is stamped kind provider, the provider's name, and the run's id."""
    await local.remember(M1, fact(stamps, "Same words.", attributes={"a": 1}))
    await local.remember(M1, fact(stamps, "same words", attributes={"b": 2}))
    await local.remember(M1, fact(stamps, "Old news.", valid_to=T0))

    outcome = await run(local, stamps)

    assert len(outcome.changes) == 3
    for change in outcome.changes:
        written = [v for v in await local.history(M1, change.record_id) if v.version == change.version]
        assert [v.written_by for v in written] == [RUN_BY]


async def test_a_run_stops_at_its_budget_and_the_next_resumes_after_through(local: LocalProvider,
                                                                            stamps: Stamps) -> None:
    """With a budget of 2 records a run reads the two oldest, stops (stopped, exhausted) and reports
    through the second's written_at; the next run, resumed there, reads only the rest. Duplicates of
    records read by the first run are still found by the second."""
    first = await local.remember(M1, fact(stamps, "One."))
    second = await local.remember(M1, fact(stamps, "Two."))
    third = await local.remember(M1, fact(stamps, "one"))
    fourth = await local.remember(M1, fact(stamps, "Four.", valid_to=T0))

    stopped = await run(local, stamps, budget=2)

    assert (stopped.status, stopped.budget_exhausted, stopped.read.count) == ("stopped", True, 2)
    assert stopped.read.through == second.time.written_at and stopped.changes == ()

    resumed = await run(local, stamps, budget=2, resume_after=stopped.read.through, run_id=REVERT)

    assert (resumed.status, resumed.budget_exhausted, resumed.read.count) == ("completed", False, 2)
    assert resumed.read.through == fourth.time.written_at
    assert await active_ids(local) == {first.id, second.id}
    assert {c.record_id for c in resumed.changes} == {third.id, fourth.id}


async def test_a_run_never_stops_between_two_records_of_one_instant(local: LocalProvider, stamps: Stamps) -> None:
    """A resume after `through` would skip a record written at that same instant, so the run reads on
    to the end of the instant even past its budget."""
    at = stamps.tick()
    same = [await local.remember(M1, NewRecord("fact", (), PERSON, at, title=f"Fact {i}")) for i in range(3)]
    later = await local.remember(M1, fact(stamps, "Later."))

    outcome = await run(local, stamps, budget=1)

    assert (outcome.status, outcome.read.count, outcome.read.through) == ("stopped", 3, at)
    rest = await run(local, stamps, resume_after=outcome.read.through, run_id=REVERT)
    assert rest.read.count == 1 and rest.read.through == later.time.written_at
    assert len(same) == 3


async def test_changes_are_reported_as_they_are_written(local: LocalProvider, stamps: Stamps) -> None:
    """on_change is told of each change in order, so a run that fails halfway still says what it did."""
    await local.remember(M1, fact(stamps, "Twice."))
    await local.remember(M1, fact(stamps, "twice"))
    seen: list[Change] = []
    outcome = await local.consolidate(M1, RUN, budget=None, resume_after=None, by=RUN_BY, at=stamps.tick(),
                                      on_change=seen.append)
    assert seen == list(outcome.changes) and len(seen) == 1


async def test_a_budget_below_one_is_refused(local: LocalProvider, stamps: Stamps) -> None:
    with pytest.raises(ProviderRejected):
        await run(local, stamps, budget=0)


async def test_revert_appends_and_history_keeps_both(local: LocalProvider, stamps: Stamps) -> None:
    """Revert makes each record the run forgot or superseded current again as a new version, stamped
    with the revert's writer; history keeps the original, the run's version and the revert's."""
    kept = await local.remember(M1, fact(stamps, "Shared.", attributes={"a": 1}))
    twin = await local.remember(M1, fact(stamps, "shared", attributes={"b": 2}))
    expired = await local.remember(M1, fact(stamps, "Gone.", valid_to=T0))
    outcome = await run(local, stamps)
    assert len(outcome.changes) == 3

    reversal = await local.revert(M1, RUN, outcome.changes, by=REVERT_BY, at=stamps.tick())

    assert reversal.skipped == ()
    assert {(c.record_id, c.kind, c.version) for c in reversal.changes} == {
        (kept.id, "superseded", 3), (twin.id, "superseded", 3), (expired.id, "superseded", 3)}
    assert await active_ids(local) == {kept.id, twin.id, expired.id}
    assert (await local.get(M1, kept.id)).attributes == {"a": 1}
    for record in (kept, twin, expired):
        versions = await local.history(M1, record.id)
        assert [v.written_by for v in versions] == [record.written_by, RUN_BY, REVERT_BY]
        assert versions[-1].content == record.content


async def test_revert_forgets_what_a_run_created_and_skips_what_changed_since(local: LocalProvider,
                                                                               stamps: Stamps) -> None:
    """A record the run created is forgotten; a record someone changed after the run is left as it is
    and reported as skipped, since reverting would overwrite that later statement."""
    created = await local.remember(M1, NewRecord("fact", (), RUN_BY, stamps.tick(), title="Concluded."))
    kept = await local.remember(M1, fact(stamps, "Dup."))
    twin = await local.remember(M1, fact(stamps, "dup"))
    outcome = await run(local, stamps)
    await local.revise(M1, twin.id, stamps.revision(title="brought back by a person"))
    changes = (Change(created.id, "created", 1), *outcome.changes)

    reversal = await local.revert(M1, RUN, changes, by=REVERT_BY, at=stamps.tick())

    assert reversal.skipped == (twin.id,)
    assert reversal.changes == (Change(created.id, "forgotten", 2),)
    assert (await local.get(M1, twin.id)).title == "brought back by a person"
    assert await active_ids(local) == {kept.id, twin.id}


async def test_a_later_run_leaves_what_a_revert_brought_back(local: LocalProvider, stamps: Stamps) -> None:
    """After a revert, the next run does not merge or expire the records it restored again: the revert
    said to keep them. Once a member writes to one, it is read like any other record."""
    kept = await local.remember(M1, fact(stamps, "Dup."))
    twin = await local.remember(M1, fact(stamps, "dup"))
    old = await local.remember(M1, fact(stamps, "Old.", valid_to=T0))
    outcome = await run(local, stamps)
    await local.revert(M1, RUN, outcome.changes, by=REVERT_BY, at=stamps.tick())

    again = await run(local, stamps, run_id="hcon_" + "e" * 32)
    assert again.changes == ()
    assert await active_ids(local) == {kept.id, twin.id, old.id}

    touched: Record = await local.revise(M1, twin.id, stamps.revision(attributes={"checked": True}))
    third = await run(local, stamps, run_id="hcon_" + "f" * 32)
    assert [(c.record_id, c.kind) for c in third.changes] == [(kept.id, "superseded"), (touched.id, "forgotten")]
    assert await active_ids(local) == {kept.id, old.id}


async def test_reverting_a_revert_does_the_run_again(local: LocalProvider, stamps: Stamps) -> None:
    """A revert is a run like any other: reverting it forgets again what it brought back."""
    kept = await local.remember(M1, fact(stamps, "Twice."))
    twin = await local.remember(M1, fact(stamps, "twice"))
    outcome = await run(local, stamps)
    reversal = await local.revert(M1, RUN, outcome.changes, by=REVERT_BY, at=stamps.tick())
    redo_by = Writer(kind="provider", id="local", consolidation_id="hcon_" + "9" * 32)

    redo = await local.revert(M1, REVERT, reversal.changes, by=redo_by, at=stamps.tick())

    assert redo.changes == (Change(twin.id, "forgotten", 4),)
    assert await active_ids(local) == {kept.id}
