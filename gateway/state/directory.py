"""Who exists, held in memory: members, their keys, groups and who belongs to each.

The store changes it after each commit of its own, and `refresh` brings it up to the rows when another
instance changed them (gateway/state/coherence.py). Every refresh replaces what is held about one entity
with what its rows say now, so applying a change twice, or one already applied, is harmless.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

KEY_PREFIX = "mf_"


def hash_key(secret: str) -> str:
    # API keys carry 256 bits of randomness, so a fast hash is enough: there is nothing to brute-force.
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class Member:
    id: str
    name: str
    type: str
    is_admin: bool
    created_at: int

    @property
    def principal(self) -> str:
        return f"member:{self.id}"


@dataclass(frozen=True)
class GroupRow:
    id: str
    name: str
    created_at: int


def member_of_row(row: Any) -> Member:
    return Member(row.id, row.name, row.type, bool(row.is_admin), row.created_at)


class Directory:
    def __init__(self) -> None:
        self._members: dict[str, Member] = {}
        self._subjects: dict[str, str] = {}  # external subject -> member id
        self._keys: dict[str, tuple[str, str]] = {}  # key hash -> (key id, member id)
        self._groups: dict[str, GroupRow] = {}
        self._group_members: dict[str, set[str]] = {}
        self._member_groups: dict[str, set[str]] = {}

    # -- reads

    def member(self, member_id: str) -> Member | None:
        return self._members.get(member_id)

    def member_count(self) -> int:
        return len(self._members)

    def member_for_digest(self, digest: str) -> Member | None:
        found = self._keys.get(digest)
        return self._members.get(found[1]) if found else None

    def member_for_subject(self, subject: str) -> Member | None:
        member_id = self._subjects.get(subject)
        return self._members.get(member_id) if member_id else None

    def keys_of(self, member_id: str) -> list[str]:
        return sorted(kid for kid, mid in self._keys.values() if mid == member_id)

    def group(self, group_id: str) -> GroupRow | None:
        return self._groups.get(group_id)

    def group_by_name(self, name: str) -> GroupRow | None:
        return next((g for g in self._groups.values() if g.name == name), None)

    def groups_of(self, member_id: str) -> tuple[str, ...]:
        return tuple(sorted(self._member_groups.get(member_id, ())))

    def members_of(self, group_id: str) -> tuple[str, ...]:
        return tuple(sorted(self._group_members.get(group_id, ())))

    def belongs(self, group_id: str, member_id: str) -> bool:
        return member_id in self._group_members.get(group_id, ())

    # -- changes this instance made

    def put_member(self, member: Member, subject: str | None = None) -> None:
        self._members[member.id] = member
        if subject:
            self._subjects[subject] = member.id

    def put_key(self, digest: str, key_id: str, member_id: str) -> None:
        self._keys[digest] = (key_id, member_id)

    def drop_key(self, key_id: str) -> None:
        for digest, (kid, _mid) in list(self._keys.items()):
            if kid == key_id:
                del self._keys[digest]

    def put_group(self, group: GroupRow) -> None:
        self._groups[group.id] = group
        self._group_members.setdefault(group.id, set())

    def join(self, group_id: str, member_id: str) -> None:
        self._group_members.setdefault(group_id, set()).add(member_id)
        self._member_groups.setdefault(member_id, set()).add(group_id)

    def leave(self, group_id: str, member_id: str) -> None:
        self._group_members.get(group_id, set()).discard(member_id)
        self._member_groups.get(member_id, set()).discard(group_id)

    # -- what the rows say now (another instance's changes)

    def refresh_member(self, member_id: str, row: Any | None) -> None:
        for subject, mid in list(self._subjects.items()):
            if mid == member_id:
                del self._subjects[subject]
        if row is None:
            self._members.pop(member_id, None)
            for kid, mid in list(self._keys.values()):
                if mid == member_id:
                    self.drop_key(kid)
            self.refresh_memberships(member_id, ())
            return
        self.put_member(member_of_row(row), row.external_subject)

    def refresh_keys(self, member_id: str, rows: Iterable[Any]) -> None:
        for kid, mid in list(self._keys.values()):
            if mid == member_id:
                self.drop_key(kid)
        for row in rows:
            self.put_key(row.key_hash, row.id, member_id)

    def refresh_group(self, group_id: str, row: Any | None, member_ids: Iterable[str]) -> None:
        for member_id in self._group_members.pop(group_id, set()):
            self._member_groups.get(member_id, set()).discard(group_id)
        self._groups.pop(group_id, None)
        if row is None:
            return
        self.put_group(GroupRow(row.id, row.name, row.created_at))
        for member_id in member_ids:
            self.join(group_id, member_id)

    def refresh_memberships(self, member_id: str, group_ids: Iterable[str]) -> None:
        for group_id in self._member_groups.pop(member_id, set()):
            self._group_members.get(group_id, set()).discard(member_id)
        for group_id in group_ids:
            if group_id in self._groups:
                self.join(group_id, member_id)
