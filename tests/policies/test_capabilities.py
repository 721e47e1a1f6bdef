"""`policies.capabilities`: what a request asks against what each provider declares, as `degraded` strings."""

from __future__ import annotations

from datetime import UTC, datetime

from adapters.base import Capabilities, Condition, RecallQuery, Signal
from policies.capabilities import SignalSplit, emulation_notes, narrow, signal_degradations, split_signals


def _caps(*signals: Signal, emulated: tuple[Signal, ...] = ()) -> Capabilities:
    return Capabilities(
        isolation="container", derivation="none", signals=tuple(signals), emulated_signals=emulated
    )


ACME = Condition("attributes.account", "eq", "acme")
EVERYTHING = RecallQuery(
    query="what did Acme say about renewal?",
    text="renewal",
    filters=(ACME,),
    types=("fact", "note"),
    as_of=datetime(2026, 10, 1, tzinfo=UTC),
    include="all",
    limit=8,
)


def test_split_keeps_the_request_order_and_names_what_is_lacking() -> None:
    """A provider is asked the signals it declares; the others are named as lacking, in request order."""
    split = split_signals(EVERYTHING, _caps("filters", "text"))
    assert split == SignalSplit(asked=("text", "filters"), lacking=("query",))


def test_split_of_a_provider_that_has_everything_lacks_nothing() -> None:
    """Nothing is lacking when the provider declares every signal asked."""
    assert split_signals(EVERYTHING, _caps("query", "text", "filters")).lacking == ()


def test_split_only_considers_signals_the_request_gave() -> None:
    """A signal the request did not give is neither asked nor lacking (an empty string is not given)."""
    split = split_signals(RecallQuery(text="renewal", query=""), _caps("query"))
    assert split == SignalSplit(asked=(), lacking=("text",))


def test_narrow_takes_out_only_the_lacking_signals() -> None:
    """The narrowed query keeps types, as_of, include and limit, and drops the signals not kept."""
    narrowed = narrow(EVERYTHING, ("text",))
    assert narrowed == RecallQuery(
        text="renewal",
        types=("fact", "note"),
        as_of=datetime(2026, 10, 1, tzinfo=UTC),
        include="all",
        limit=8,
    )
    assert narrowed.signals() == ("text",)
    assert narrow(EVERYTHING, ("query", "text", "filters")) == EVERYTHING


def test_narrow_to_the_split_asks_a_provider_nothing_it_lacks() -> None:
    """split then narrow: the query sent to a provider holds exactly the signals it declared."""
    caps = _caps("query", "filters")
    split = split_signals(EVERYTHING, caps)
    assert narrow(EVERYTHING, split.asked).signals() == ("query", "filters")


def test_a_signal_no_provider_has_is_not_supported_once() -> None:
    """When no provider in the plan has a signal, one `<signal>:not_supported` says so."""
    splits = {
        "local": split_signals(EVERYTHING, _caps("text", "filters")),
        "mem0": split_signals(EVERYTHING, _caps("filters")),
    }
    # The order of the entries across signals is not part of the contract; their set is.
    assert sorted(signal_degradations(splits)) == ["provider:mem0:text:not_supported", "query:not_supported"]


def test_a_signal_some_providers_lack_is_named_per_provider_sorted() -> None:
    """When some providers lack a signal, each is named, `provider:<name>:<signal>:not_supported`, sorted."""
    splits = {
        "zep": split_signals(EVERYTHING, _caps("text")),
        "local": split_signals(EVERYTHING, _caps("query", "text", "filters")),
        "mem0": split_signals(EVERYTHING, _caps("text")),
    }
    assert signal_degradations(splits) == [
        "provider:mem0:query:not_supported",
        "provider:zep:query:not_supported",
        "provider:mem0:filters:not_supported",
        "provider:zep:filters:not_supported",
    ]


def test_nothing_is_degraded_when_every_provider_answers_every_signal() -> None:
    """No strings at all when nothing asked was left out."""
    splits = {name: split_signals(EVERYTHING, _caps("query", "text", "filters")) for name in ("a", "b")}
    assert signal_degradations(splits) == []
    assert signal_degradations({}) == []


def test_a_single_provider_lacking_a_signal_is_not_supported_without_provider_suffix() -> None:
    """With one provider in the plan, lacking a signal means the whole request went without it."""
    splits = {"mem0": split_signals(RecallQuery(text="renewal"), _caps("query"))}
    assert signal_degradations(splits) == ["text:not_supported"]


def test_emulated_signals_are_noted_only_when_asked() -> None:
    """`provider:<name>:<signal>:emulated` per asked signal a provider only emulates, providers sorted."""
    capabilities = {
        "zep": _caps("query", "text", emulated=("query",)),
        "local": _caps("query", "text", "filters", emulated=("query", "filters")),
        "mem0": _caps("query"),
    }
    assert emulation_notes(RecallQuery(query="renewal?", text="renewal"), capabilities) == [
        "provider:local:query:emulated",
        "provider:zep:query:emulated",
    ]
    assert emulation_notes(RecallQuery(filters=(ACME,)), capabilities) == ["provider:local:filters:emulated"]
    assert emulation_notes(RecallQuery(text="renewal"), capabilities) == []
