"""The one grammar of `degraded` entries (§6.3: what a request asked for and was not done), and its builders.

Part of the contract (an adapter's `RecallAnswer.degraded` follows it), so adapters, policies and the
gateway all build their entries here.

    entry     = plain / scoped
    plain     = subject ":" condition                    e.g. text:not_supported, subtree:capped_at_200_memories
    scoped    = scope ":" name ":" [ subject ":" ] condition
                                                         e.g. provider:m0:timeout, provider:m0:as_of:not_supported
    scope     = "provider" / "memory" / "record"
    name      = 1*64( ALPHA / DIGIT / "_" / "-" / "." )  a provider's configured name, a memory's or record's id
    subject   = token, not a scope                       what was asked: a signal, as_of, subtree, children...
    condition = token                                    what became of it: not_supported, timeout, ...
    token     = ( lower / DIGIT ) *( lower / DIGIT / "_" / "." )

A scoped entry says where: `provider:NAME:` for what one provider did not do (without a subject, the
provider as a whole: `timeout`, `unavailable`, `circuit_open`, `deadline`...), `memory:ID:` for one
memory, `record:ID:` for one record (a migration's report). An adapter reports its entries plain or
as a bare condition (`as_of:not_supported`, `pool_limited`); the gateway scopes them to the provider
(`provider_entry`). Every place that builds a `degraded` string uses these builders, and `parse` is the
grammar a test checks each of them against.
docs/degraded.md lists the vocabulary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SCOPES = ("provider", "memory", "record")
_WORD = r"[a-z0-9][a-z0-9_.]*"
_NAME = r"[A-Za-z0-9_.-]{1,64}"
_PLAIN = re.compile(rf"(?P<subject>{_WORD}):(?P<condition>{_WORD})")
_SCOPED = re.compile(
    rf"(?P<scope>{'|'.join(SCOPES)}):(?P<name>{_NAME}):(?:(?P<subject>{_WORD}):)?(?P<condition>{_WORD})")
_NAME_ONLY = re.compile(_NAME)
_WORDS = re.compile(r"[^a-z0-9_.]+")


@dataclass(frozen=True)
class Entry:
    subject: str | None
    condition: str
    scope: str | None = None
    name: str | None = None


class NotAnEntry(ValueError):
    """A string that is not a `degraded` entry of the grammar."""


def parse(entry: str) -> Entry:
    """The parts of `entry`; NotAnEntry when it does not follow the grammar."""
    if (scoped := _SCOPED.fullmatch(entry)) is not None:
        return Entry(scoped["subject"], scoped["condition"], scoped["scope"], scoped["name"])
    if (plain := _PLAIN.fullmatch(entry)) is not None and plain["subject"] not in SCOPES:
        return Entry(plain["subject"], plain["condition"])
    raise NotAnEntry(f"not a degraded entry: {entry!r}")


def token(text: str) -> str:
    """A word of free text as a token (`memory_unavailable: timeout` -> `memory_unavailable_timeout`)."""
    word = _WORDS.sub("_", text.lower()).strip("_.")
    return word or "unknown"


def entry(subject: str, condition: str) -> str:
    return _checked(f"{subject}:{condition}")


def provider_entry(name: str, reason: str) -> str:
    """What provider `name` did not do: a bare condition (`timeout`) or an adapter's own plain entry
    (`as_of:not_supported`), scoped to the provider."""
    return _checked(f"provider:{_named(name)}:{reason}")


def memory_entry(memory_id: str, subject: str, condition: str) -> str:
    return _checked(f"memory:{_named(memory_id)}:{subject}:{condition}")


def record_entry(record_id: str, subject: str, condition: str) -> str:
    """One record's entry; an id that is no name of the grammar (an imported file's own ids) is `unnamed`."""
    name = record_id if _NAME_ONLY.fullmatch(record_id) else "unnamed"
    return _checked(f"record:{name}:{subject}:{condition}")


def _named(name: str) -> str:
    if not _NAME_ONLY.fullmatch(name):
        raise NotAnEntry(f"not a name of a degraded entry: {name!r}")
    return name


def _checked(built: str) -> str:
    parse(built)  # a builder never emits what the grammar refuses (a provider name with a colon, ...)
    return built
