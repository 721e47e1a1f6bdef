"""The one pagination cursor of every listing, the gateway's own and every adapter's.

A cursor is opaque to the caller and names a position in one listing: `base64url(JSON [version, listing,
position]) "." base64url(tag)`. The version lets the form change without misreading an old cursor; the
listing name makes a cursor handed out by one listing (or one listing order) refused by every other; the
tag, a keyed digest of the rest, makes an edited cursor refused rather than read as another position.

The tag's key is fixed, not a secret: a cursor is not a credential. What a page shows is decided on every
request from the caller's own access, so a forged position could only name a place the caller may list
anyway; the tag is there so that a mangled or hand-made cursor is refused plainly instead of paging from
somewhere unexpected. Positions hold only strings and integers that fit in 64 bits (what SQL compares).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Any

from adapters.errors import ProviderRejected

VERSION = 1
MAX_LENGTH = 2048  # far past any position this server hands out; a longer one is not read at all
_KEY = b"memfed listing cursor"
_TAG_BYTES = 12
_INT_RANGE = range(-(2**63), 2**63)

Value = int | str


class InvalidCursor(ProviderRejected, ValueError):
    """A cursor this listing did not hand out: malformed, edited, of another version or another listing.

    A ProviderRejected, so an adapter's refusal reaches the caller as the gateway's bad-cursor error, and
    a ValueError, so code that validates input catches it with the rest."""


def encode(listing: str, position: Sequence[Value]) -> str:
    """The cursor naming `position` in `listing`."""
    for value in position:
        _check(value)
    body = _b64(json.dumps([VERSION, listing, list(position)], separators=(",", ":"), ensure_ascii=True).encode())
    return f"{body}.{_b64(_tag(body))}"


def decode(listing: str, cursor: str, shape: Sequence[type]) -> tuple[Any, ...]:
    """The position `cursor` names in `listing`, each value of the type `shape` gives; InvalidCursor otherwise."""
    if not isinstance(cursor, str) or not cursor or len(cursor) > MAX_LENGTH or not cursor.isascii():
        raise InvalidCursor("invalid cursor")
    body, dot, tag = cursor.partition(".")
    try:
        good = bool(dot) and hmac.compare_digest(_unb64(tag), _tag(body))
        found = json.loads(_unb64(body)) if good else None
    except (binascii.Error, ValueError, UnicodeError):
        raise InvalidCursor("invalid cursor") from None
    if not good or not isinstance(found, list) or len(found) != 3 or found[0] != VERSION or found[1] != listing:
        raise InvalidCursor("invalid cursor")
    position = found[2]
    if not isinstance(position, list) or len(position) != len(shape):
        raise InvalidCursor("invalid cursor")
    if not all(type(value) is kind and _fits(value) for value, kind in zip(position, shape, strict=True)):
        raise InvalidCursor("invalid cursor")
    return tuple(position)


def _check(value: Value) -> None:
    if type(value) not in (int, str) or not _fits(value):
        raise ValueError(f"a cursor position holds strings and 64-bit integers, not {value!r}")


def _fits(value: object) -> bool:
    return not isinstance(value, int) or value in _INT_RANGE


def _tag(body: str) -> bytes:
    return hashlib.blake2b(body.encode("ascii"), key=_KEY, digest_size=_TAG_BYTES).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
