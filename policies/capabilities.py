"""What a request asks of providers against what each declares: the `degraded` strings (§6.3, §10.2).

Pure. A signal a provider lacks is never silently dropped: it is named here so the gateway can put
it in `degraded`, and so the provider is not asked for it at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from adapters import degraded as entries
from adapters.base import Capabilities, RecallQuery, Signal


@dataclass(frozen=True)
class SignalSplit:
    """For one provider: the signals it will be asked, and the ones it lacks."""

    asked: tuple[Signal, ...]
    lacking: tuple[Signal, ...]


def split_signals(query: RecallQuery, capabilities: Capabilities) -> SignalSplit:
    asked = query.signals()
    supported = tuple(s for s in asked if s in capabilities.signals)
    lacking = tuple(s for s in asked if s not in capabilities.signals)
    return SignalSplit(supported, lacking)


def narrow(query: RecallQuery, keep: Sequence[Signal]) -> RecallQuery:
    """The same query with the signals a provider lacks taken out."""
    return RecallQuery(
        query=query.query if "query" in keep else None,
        text=query.text if "text" in keep else None,
        filters=query.filters if "filters" in keep else (),
        types=query.types,
        as_of=query.as_of,
        include=query.include,
        limit=query.limit,
    )


def signal_degradations(splits: Mapping[str, SignalSplit]) -> list[str]:
    """`<signal>:not_supported` when no provider in the plan has it; otherwise one entry per provider
    that lacks it, `provider:<name>:<signal>:not_supported`, so the caller knows which part of the
    tree was searched without it."""
    out: list[str] = []
    signals: list[Signal] = []
    for split in splits.values():
        for s in split.asked + split.lacking:
            if s not in signals:
                signals.append(s)
    for signal in signals:
        lacking = sorted(name for name, split in splits.items() if signal in split.lacking)
        if not lacking:
            continue
        if len(lacking) == len(splits):
            out.append(entries.entry(signal, "not_supported"))
        else:
            out.extend(entries.provider_entry(name, entries.entry(signal, "not_supported")) for name in lacking)
    return out


def emulation_notes(query: RecallQuery, capabilities: Mapping[str, Capabilities]) -> list[str]:
    """`provider:<name>:<signal>:emulated` for an asked signal a provider answers only by emulation."""
    asked = query.signals()
    notes = []
    for name in sorted(capabilities):
        for signal in capabilities[name].emulated_signals:
            if signal in asked:
                notes.append(entries.provider_entry(name, entries.entry(signal, "emulated")))
    return notes
