"""The cursors of `GET /v1/memories`: where the next page resumes, as keys, never as an offset.

An offset into a listing means recomputing the listing up to it on every page; a key (the last memory's
(created_at, id), and for a subtree the keys above it) lets the next page bisect to its place
(policies/pages.py). Every cursor is the one codec of adapters/cursors.py, a listing name per kind, so a
cursor of one kind (or of another listing) is refused by the others:

* `memories.children` (`?parent=`): created_at and id of the last child walked;
* `memories.subtree` (`?ancestor=`): 1 when it holds the whole path from below the ancestor (else 0, only
  its deepest part, when that would not fit), then `created_at:id;...` for each memory down the path;
* `memories.entries` (entry points): depth, created_at and id of the last one listed.
"""

from __future__ import annotations

from adapters import cursors
from gateway.base.errors import ApiError, bad_cursor, invalid
from gateway.state.entries import EntryKey
from policies.pages import SortKey

CHILDREN, SUBTREE, ENTRIES = "memories.children", "memories.subtree", "memories.entries"
LONGEST = cursors.MAX_LENGTH  # a deeper path keeps only its deepest part


def gone() -> ApiError:
    return invalid("The place this cursor points to is gone (memories above it were deleted or moved): list "
                   "again without a cursor.", "cursor")


def _read(listing: str, cursor: str, shape: tuple[type, ...]) -> tuple[object, ...]:
    try:
        return cursors.decode(listing, cursor, shape)
    except cursors.InvalidCursor:
        raise bad_cursor() from None


def _key(stamp: object, memory_id: object) -> SortKey:
    if not isinstance(stamp, int) or stamp < 0 or not isinstance(memory_id, str) or not 0 < len(memory_id) <= 200:
        raise bad_cursor()
    return stamp, memory_id


def child_cursor(key: SortKey) -> str:
    return cursors.encode(CHILDREN, key)


def child_after(cursor: str | None) -> SortKey | None:
    return None if not cursor else _key(*_read(CHILDREN, cursor, (int, str)))


def subtree_cursor(path: list[SortKey]) -> str:
    complete = True
    while True:
        cursor = cursors.encode(SUBTREE, (int(complete), ";".join(f"{k[0]}:{k[1]}" for k in path)))
        if len(cursor) <= LONGEST or len(path) == 1:
            return cursor
        path, complete = path[1:], False


def subtree_after(cursor: str | None) -> tuple[list[SortKey], bool]:
    """(the keys down the path, whether they start below the ancestor)."""
    if not cursor:
        return [], True
    flag, body = _read(SUBTREE, cursor, (int, str))
    if flag not in (0, 1) or not isinstance(body, str) or not body:
        raise bad_cursor()
    path: list[SortKey] = []
    for part in body.split(";"):
        stamp, sep, memory_id = part.partition(":")
        if not sep or not stamp.isdigit():
            raise bad_cursor()
        path.append(_key(int(stamp), memory_id))
    return path, flag == 1


def entry_cursor(key: EntryKey) -> str:
    return cursors.encode(ENTRIES, key)


def entry_after(cursor: str | None) -> EntryKey | None:
    if not cursor:
        return None
    depth, stamp, memory_id = _read(ENTRIES, cursor, (int, int, str))
    if not isinstance(depth, int) or depth < 0:
        raise bad_cursor()
    at, memory = _key(stamp, memory_id)
    return depth, at, memory
