"""The one listing cursor (adapters.cursors): what it hands out reads back, and nothing else does."""

from __future__ import annotations

import base64
import json

import pytest

from adapters import cursors
from adapters.base import ProviderRejected, decode_cursor, encode_cursor
from adapters.cursors import InvalidCursor


def _body(cursor: str) -> list[object]:
    body = cursor.partition(".")[0]
    found: list[object] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    return found


@pytest.mark.parametrize("position", [(0,), (2**63 - 1, "hrec_x"), ("2026-01-01T00:00:00Z", "id é"), (-5, 7)])
def test_a_cursor_reads_back_as_the_position_it_was_made_from(position: tuple[int | str, ...]) -> None:
    """decode(encode(p)) is p, value for value and type for type."""
    shape = tuple(type(v) for v in position)
    cursor = cursors.encode("records", position)
    assert cursors.decode("records", cursor, shape) == position
    assert cursor.isascii() and "=" not in cursor  # safe in a query string as it is


def test_a_cursor_is_refused_by_every_other_listing() -> None:
    """A cursor from one listing (or one order of a listing) is refused by another, even of the same shape."""
    cursor = cursors.encode("audit.oldest", (4, 0))
    assert cursors.decode("audit.oldest", cursor, (int, int)) == (4, 0)
    for other in ("audit.newest", "memories", "records"):
        with pytest.raises(InvalidCursor):
            cursors.decode(other, cursor, (int, int))


def test_an_edited_cursor_is_refused() -> None:
    """Changing the position inside a cursor, or any one character of it, makes it refused."""
    cursor = cursors.encode("memories", (50,))
    tag = cursor.partition(".")[2]
    forged = base64.urlsafe_b64encode(json.dumps([1, "memories", [5000]]).encode()).decode().rstrip("=")
    with pytest.raises(InvalidCursor):
        cursors.decode("memories", f"{forged}.{tag}", (int,))
    for at in range(len(cursor)):
        if cursor[at] == ".":
            continue
        changed = cursor[:at] + ("A" if cursor[at] != "A" else "B") + cursor[at + 1 :]
        with pytest.raises(InvalidCursor):
            cursors.decode("memories", changed, (int,))


def test_a_cursor_of_another_version_or_shape_is_refused() -> None:
    """The version, the number of values and each value's type must be the ones the listing hands out."""
    cursor = cursors.encode("records", ("2026-01-01", "hrec_a"))
    assert _body(cursor)[0] == cursors.VERSION
    with pytest.raises(InvalidCursor):
        cursors.decode("records", cursor, (int, str))
    with pytest.raises(InvalidCursor):
        cursors.decode("records", cursor, (str,))
    with pytest.raises(InvalidCursor):
        cursors.decode("records", cursors.encode("records", (1, "x")), (str, str))


@pytest.mark.parametrize("cursor", ["", ".", "not base64 at all!", "WzFd", "eyJhIjoxfQ", "a.b", "é.é", "x" * 5000])
def test_garbage_is_an_invalid_cursor_and_a_provider_rejection(cursor: str) -> None:
    """Whatever was not handed out is InvalidCursor, which is both a ValueError and a ProviderRejected
    (so an adapter's refusal reaches the caller as the gateway's own bad-cursor answer)."""
    with pytest.raises(InvalidCursor) as caught:
        cursors.decode("records", cursor, (str, str))
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, ProviderRejected)


def test_positions_hold_only_strings_and_64_bit_integers() -> None:
    """A position a database could not compare is never made into a cursor."""
    for bad in ((2**63,), (1.5,), (None,), (True,)):
        with pytest.raises(ValueError):
            cursors.encode("records", bad)  # type: ignore[arg-type]


def test_the_records_cursor_is_the_one_codec() -> None:
    """adapters.base's records cursor is the shared codec under the `records` listing name."""
    cursor = encode_cursor(("2026-01-01T00:00:00+00:00", "hrec_a"))
    assert cursors.decode("records", cursor, (str, str)) == ("2026-01-01T00:00:00+00:00", "hrec_a")
    assert decode_cursor(cursor, str) == ("2026-01-01T00:00:00+00:00", "hrec_a")
    with pytest.raises(InvalidCursor):
        decode_cursor(cursors.encode("memories", (3,)), str)
