"""The cursors of `GET /v1/memories`: where the next page resumes, as keys, never as an offset.

An offset into a listing means recomputing the listing up to it on every page; a key (the last memory's
(created_at, id), and for a subtree the keys above it) lets the next page bisect to its place
(policies/pages.py). Three kinds, each tied to its listing:

* `c:` a child listing (`?parent=`): `created_at:id` of the last child walked;
* `d:` a subtree (`?ancestor=`): `1` when it holds the whole path from below the ancestor (else `0`,
  only its deepest part, when that would not fit), then `created_at:id` for each memory down the path;
* `e:` entry points: `depth:created_at:id` of the last one listed.
"""

from __future__ import annotations

import base64

from gateway.errors import ApiError
from gateway.limits import cursor_number
from gateway.state.entries import EntryKey
from policies.pages import SortKey

LONGEST = 2000  # characters of a cursor; a deeper path keeps only its deepest part


def _refused() -> ApiError:
    return ApiError(422, "memory_invalid", "The cursor is not one this server gave.", param="cursor")


def gone() -> ApiError:
    return ApiError(422, "memory_invalid", "The place this cursor points to is gone (memories above it were "
                    "deleted or moved): list again without a cursor.", param="cursor")


def _encode(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


def _decode(cursor: str, kind: str) -> str:
    try:
        found, sep, value = base64.urlsafe_b64decode(cursor.encode()).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        raise _refused() from None
    if found != kind or not sep:
        raise _refused()
    return value


def _key(text: str) -> SortKey:
    stamp, sep, memory_id = text.partition(":")
    try:
        number = cursor_number(stamp)
    except ValueError:
        raise _refused() from None
    if not sep or not memory_id or len(memory_id) > 200:
        raise _refused()
    return number, memory_id


def child_cursor(key: SortKey) -> str:
    return _encode(f"c:{key[0]}:{key[1]}")


def child_after(cursor: str | None) -> SortKey | None:
    return None if not cursor else _key(_decode(cursor, "c"))


def subtree_cursor(path: list[SortKey]) -> str:
    complete = True
    while True:
        cursor = _encode(f"d:{int(complete)}:" + ";".join(f"{k[0]}:{k[1]}" for k in path))
        if len(cursor) <= LONGEST or len(path) == 1:
            return cursor
        path, complete = path[1:], False


def subtree_after(cursor: str | None) -> tuple[list[SortKey], bool]:
    """(the keys down the path, whether they start below the ancestor)."""
    if not cursor:
        return [], True
    flag, sep, body = _decode(cursor, "d").partition(":")
    if flag not in ("0", "1") or not sep or not body:
        raise _refused()
    return [_key(part) for part in body.split(";")], flag == "1"


def entry_cursor(key: EntryKey) -> str:
    return _encode(f"e:{key[0]}:{key[1]}:{key[2]}")


def entry_after(cursor: str | None) -> EntryKey | None:
    if not cursor:
        return None
    depth, sep, rest = _decode(cursor, "e").partition(":")
    try:
        level = cursor_number(depth)
    except ValueError:
        raise _refused() from None
    if not sep:
        raise _refused()
    stamp, memory_id = _key(rest)
    return level, stamp, memory_id
