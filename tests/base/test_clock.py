"""memfed's one clock (adapters.clock, gateway.base.clock its face): UTC text at a stated, fixed-width precision."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from adapters import clock
from adapters.version_rows import ts
from gateway.audit.query import stamp
from gateway.base import clock as gateway_clock
from gateway.migration.export_format import stamp as export_stamp

AT = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)


def test_each_precision_is_utc_with_a_z_and_a_fixed_width() -> None:
    """Seconds, milliseconds and microseconds of the same instant; another zone is converted, a naive time is
    taken as UTC; a whole second keeps its zeros, so text order is time order."""
    assert clock.rfc3339(AT, "seconds") == "2026-03-04T05:06:07Z"
    assert clock.rfc3339(AT) == "2026-03-04T05:06:07.890Z"
    assert clock.rfc3339(AT, "microseconds") == "2026-03-04T05:06:07.890123Z"
    assert clock.rfc3339(AT.astimezone(timezone(timedelta(hours=-5)))) == "2026-03-04T05:06:07.890Z"
    assert clock.rfc3339(AT.replace(tzinfo=None)) == "2026-03-04T05:06:07.890Z"
    assert clock.rfc3339(AT.replace(microsecond=0), "microseconds") == "2026-03-04T05:06:07.000000Z"
    assert clock.rfc3339_or_none(None) is None


def test_the_journal_form_from_epoch_microseconds_is_the_millisecond_form() -> None:
    """rfc3339_us (the audit journal's cached form) says what rfc3339 says at milliseconds."""
    us = round(AT.timestamp() * 1_000_000)
    assert clock.rfc3339_us(us) == clock.rfc3339(AT) == stamp(AT)


def test_every_stamper_is_the_one_clock() -> None:
    """The gateway's clock, the audit log's and the export's stamps and the stored version rows' text are the
    one clock at their stated precision, and now is aware UTC, in step with now_ms."""
    assert gateway_clock.rfc3339 is clock.rfc3339 and gateway_clock.as_utc is clock.utc
    assert ts(AT) == export_stamp(AT) == clock.rfc3339(AT, "microseconds")
    before = clock.now_ms()
    moment = clock.now()
    assert moment.tzinfo is UTC and before <= round(moment.timestamp() * 1000) + 1 <= clock.now_ms() + 2


def test_a_vendors_time_text_is_an_aware_instant_or_none() -> None:
    """clock.parse reads ISO 8601 with `Z`, an offset or no zone (taken as UTC) as an aware UTC instant, and
    anything else (missing, empty, not a time, not text) as None."""
    assert clock.parse("2026-03-04T05:06:07.890123Z") == AT
    assert clock.parse("2026-03-04T00:06:07.890123-05:00") == AT
    naive = clock.parse("2026-03-04T05:06:07.890123")
    assert naive == AT and naive is not None and naive.tzinfo is UTC
    for odd in (None, "", "yesterday", 17):
        assert clock.parse(odd) is None
