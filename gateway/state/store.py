"""The state store: members, keys, groups, memories and grants in SQL, mirrored in memory.

Every change is committed to the database first and then applied to the in-memory indexes, so a
request never sees a change that a crash could lose. Reads on the request path (who is this key,
which groups, the tree) come from memory.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, event, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from gateway.clock import now_ms
from gateway.ids import new_id
from gateway.state import schema as t
from gateway.state import tree_writes
from gateway.state.tree import MemoryNode, Tree, refuse_broken
from gateway.state.tree_writes import Claims, TreeLock, TreeRefused, to_the_end
from policies.access import PRIVILEGES, Grant

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


def _privs_to_text(privileges: frozenset[str]) -> str:
    return ",".join(p for p in PRIVILEGES if p in privileges)


def _privs_from_text(text: str) -> frozenset[str]:
    return frozenset(p for p in text.split(",") if p)


class StateStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.tree = Tree()
        # Tree changes one at a time (gateway/state/tree_writes.py): a route holds the lock from its checks
        # to its write; a delete claims its subtree while the providers drop its records.
        self.tree_lock = TreeLock()
        self.claims = Claims()
        self._members: dict[str, Member] = {}
        self._subjects: dict[str, str] = {}
        self._keys: dict[str, tuple[str, str]] = {}  # key hash -> (key id, member id)
        self._groups: dict[str, GroupRow] = {}
        self._group_members: dict[str, set[str]] = {}
        self._member_groups: dict[str, set[str]] = {}

    @classmethod
    async def open(cls, url: str, *, search_path: str | None = None) -> StateStore:
        """The store on `url`, loaded; StateCorrupt when its memories are not a tree."""
        engine = _engine(url, search_path)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(t.metadata.create_all)
            store = cls(engine)
            await store._load()
        except BaseException:
            await engine.dispose()
            raise
        return store

    @classmethod
    async def check_tree(cls, url: str, *, search_path: str | None = None) -> None:
        """StateCorrupt when the memories' parent links are not a tree; reads only those, creates nothing."""
        engine = _engine(url, search_path)
        try:
            await tree_writes.check_links(engine)
        finally:
            await engine.dispose()

    async def close(self) -> None:
        await self.engine.dispose()

    async def _load(self) -> None:
        async with self.engine.connect() as conn:
            for row in await conn.execute(select(t.members)):
                self._remember_member(Member(row.id, row.name, row.type, row.is_admin, row.created_at))
                if row.external_subject:
                    self._subjects[row.external_subject] = row.id
            for row in await conn.execute(select(t.api_keys)):
                self._keys[row.key_hash] = (row.id, row.member_id)
            for row in await conn.execute(select(t.groups)):
                self._groups[row.id] = GroupRow(row.id, row.name, row.created_at)
                self._group_members.setdefault(row.id, set())
            for row in await conn.execute(select(t.group_members)):
                self._group_members.setdefault(row.group_id, set()).add(row.member_id)
                self._member_groups.setdefault(row.member_id, set()).add(row.group_id)
            for row in await conn.execute(select(t.memories)):
                self.tree.put(_node(row))
            refuse_broken(self.tree)
            for row in await conn.execute(select(t.grants)):
                self.tree.add_grant(_grant(row))

    def _remember_member(self, member: Member) -> None:
        self._members[member.id] = member

    # ------------------------------------------------------------------ members and keys

    def member(self, member_id: str) -> Member | None:
        return self._members.get(member_id)

    def member_count(self) -> int:
        return len(self._members)

    def member_for_key(self, secret: str) -> Member | None:
        found = self._keys.get(hash_key(secret))
        return self._members.get(found[1]) if found else None

    def member_for_subject(self, subject: str) -> Member | None:
        member_id = self._subjects.get(subject)
        return self._members.get(member_id) if member_id else None

    async def create_member(
        self, name: str, type_: str, *, is_admin: bool = False, external_subject: str | None = None
    ) -> Member:
        member = Member(new_id("member"), name, type_, is_admin, now_ms())
        async with self.engine.begin() as conn:
            await conn.execute(
                insert(t.members).values(
                    id=member.id, name=name, type=type_, is_admin=is_admin,
                    external_subject=external_subject, created_at=member.created_at,
                )
            )
        self._remember_member(member)
        if external_subject:
            self._subjects[external_subject] = member.id
        return member

    async def member_signing_in(self, name: str, type_: str, subject: str) -> Member:
        """The member of an external subject, created on its first sign-in. Requests racing with the same
        new token (in this process or another) all get the one member the database kept: the unique
        subject decides, and a loser reads the winner's row."""
        if (found := self.member_for_subject(subject)) is not None:
            return found
        try:
            return await self.create_member(name, type_, external_subject=subject)
        except IntegrityError:
            async with self.engine.connect() as conn:
                row = (await conn.execute(select(t.members).where(t.members.c.external_subject == subject))).first()
            if row is None:  # not the subject's uniqueness that failed
                raise
            member = Member(row.id, row.name, row.type, row.is_admin, row.created_at)
            self._remember_member(member)
            self._subjects[subject] = member.id
            return member

    async def create_key(self, member_id: str, secret: str | None = None) -> tuple[str, str]:
        """A new key for the member: (key id, the secret). Only the hash of the secret is stored."""
        secret = secret or KEY_PREFIX + secrets.token_urlsafe(32)
        key_id = new_id("key")
        digest = hash_key(secret)
        async with self.engine.begin() as conn:
            await conn.execute(
                insert(t.api_keys).values(id=key_id, member_id=member_id, key_hash=digest, created_at=now_ms())
            )
        self._keys[digest] = (key_id, member_id)
        return key_id, secret

    async def revoke_key(self, member_id: str, key_id: str) -> bool:
        async with self.engine.begin() as conn:
            result = await conn.execute(
                delete(t.api_keys).where(t.api_keys.c.id == key_id, t.api_keys.c.member_id == member_id)
            )
        if not result.rowcount:
            return False
        for digest, (kid, _mid) in list(self._keys.items()):
            if kid == key_id:
                del self._keys[digest]
        return True

    def keys_of(self, member_id: str) -> list[str]:
        return sorted(kid for kid, mid in self._keys.values() if mid == member_id)

    # ------------------------------------------------------------------ groups

    def group(self, group_id: str) -> GroupRow | None:
        return self._groups.get(group_id)

    def group_by_name(self, name: str) -> GroupRow | None:
        return next((g for g in self._groups.values() if g.name == name), None)

    def groups_of(self, member_id: str) -> tuple[str, ...]:
        return tuple(sorted(self._member_groups.get(member_id, ())))

    def members_of(self, group_id: str) -> tuple[str, ...]:
        return tuple(sorted(self._group_members.get(group_id, ())))

    async def create_group(self, name: str) -> GroupRow:
        group = GroupRow(new_id("group"), name, now_ms())
        async with self.engine.begin() as conn:
            await conn.execute(insert(t.groups).values(id=group.id, name=name, created_at=group.created_at))
        self._groups[group.id] = group
        self._group_members[group.id] = set()
        return group

    async def add_to_group(self, group_id: str, member_id: str) -> None:
        if member_id in self._group_members.get(group_id, set()):
            return
        try:
            async with self.engine.begin() as conn:
                await conn.execute(insert(t.group_members).values(group_id=group_id, member_id=member_id))
        except IntegrityError:  # a concurrent request added it first (or the group went meanwhile)
            async with self.engine.connect() as conn:
                kept = (await conn.execute(select(t.group_members.c.member_id).where(
                    t.group_members.c.group_id == group_id, t.group_members.c.member_id == member_id))).first()
            if kept is None:
                raise
        self._group_members.setdefault(group_id, set()).add(member_id)
        self._member_groups.setdefault(member_id, set()).add(group_id)

    async def remove_from_group(self, group_id: str, member_id: str) -> bool:
        if member_id not in self._group_members.get(group_id, set()):
            return False
        async with self.engine.begin() as conn:
            await conn.execute(
                delete(t.group_members).where(
                    t.group_members.c.group_id == group_id, t.group_members.c.member_id == member_id
                )
            )
        self._group_members[group_id].discard(member_id)
        self._member_groups.get(member_id, set()).discard(group_id)
        return True

    async def set_groups(self, member_id: str, group_ids: set[str]) -> None:
        """Make the member's groups exactly these (used for groups asserted by an identity provider)."""
        current = set(self._member_groups.get(member_id, ()))
        for gid in group_ids - current:
            await self.add_to_group(gid, member_id)
        for gid in current - group_ids:
            await self.remove_from_group(gid, member_id)

    # ------------------------------------------------------------------ memories

    async def create_memory(
        self, *, name: str, description: str, parent_id: str | None, restricted: bool, provider: str,
        created_by: str, memory_id: str | None = None,
    ) -> MemoryNode:
        """Insert the memory and its creator's implicit grant of all four privileges (TreeRefused when the
        parent is no row, is being deleted, or sits at the deepest level)."""
        stamp = now_ms()
        node = MemoryNode(memory_id or new_id("memory"), name, description, parent_id, restricted, provider,
                          created_by, stamp, stamp)
        grant = Grant(new_id("grant"), node.id, f"member:{created_by}", frozenset(PRIVILEGES), implicit=True)

        async def write() -> None:
            async with self.engine.begin() as conn:
                await tree_writes.lock_tree(conn)
                if parent_id is not None:
                    await tree_writes.check_parent(conn, parent_id)
                await conn.execute(insert(t.memories).values(**node.__dict__))
                await conn.execute(insert(t.grants).values(_grant_row(grant, stamp)))
            self.tree.put(node)
            self.tree.add_grant(grant)

        async with self.tree_lock.held():
            self.claims.refuse_if_deleting(parent_id)
            await to_the_end(write())
        return node

    async def update_memory(self, memory_id: str, **changes: Any) -> MemoryNode:
        """Change the memory's row; a new `parent_id` is checked against the rows (TreeRefused when it is
        no row, lies below the memory, or would put a memory deeper than allowed)."""
        changes["updated_at"] = now_ms()
        moving = "parent_id" in changes

        async def write() -> MemoryNode:
            async with self.engine.begin() as conn:
                await tree_writes.lock_tree(conn)
                if moving and changes["parent_id"] is not None:
                    await tree_writes.check_parent(conn, changes["parent_id"], moving=memory_id)
                result = await conn.execute(update(t.memories).where(t.memories.c.id == memory_id).values(**changes))
                if not result.rowcount:
                    raise TreeRefused("not_found", "No such memory.")
            return self.tree.update(memory_id, **changes)

        async with self.tree_lock.held():
            self.claims.refuse_if_deleting(memory_id, changes.get("parent_id") if moving else None)
            return await to_the_end(write())

    async def delete_subtree(self, memory_id: str, claim: frozenset[str] | None = None) -> list[str]:
        """Remove the memory, its descendants, their grants and snapshots; TreeRefused when the rows hold a
        descendant that `claim` (what was dropped at the providers) lacks, added by another gateway."""

        async def write() -> list[str]:
            async with self.engine.begin() as conn:
                await tree_writes.lock_tree(conn)
                found = await tree_writes.subtree_rows(conn, memory_id)
                if claim is not None and not set(found) <= claim:
                    raise TreeRefused("busy", "Memories were added below this one while it was being deleted.")
                ids = sorted(found)
                for chunk in _chunks(ids, 500):
                    await conn.execute(delete(t.grants).where(t.grants.c.memory_id.in_(chunk)))
                    await conn.execute(delete(t.snapshots).where(t.snapshots.c.memory_id.in_(chunk)))
                    await conn.execute(delete(t.record_aliases).where(t.record_aliases.c.memory_id.in_(chunk)))
                    await conn.execute(delete(t.memories).where(t.memories.c.id.in_(chunk)))
            return self.tree.remove_subtree(memory_id) if self.tree.exists(memory_id) else []

        async with self.tree_lock.held():
            return await to_the_end(write())

    # ------------------------------------------------------------------ grants

    async def add_grant(self, memory_id: str, principal: str, privileges: frozenset[str]) -> Grant:
        grant = Grant(new_id("grant"), memory_id, principal, privileges)

        async def write() -> None:
            async with self.engine.begin() as conn:
                await tree_writes.lock_tree(conn)
                if not await tree_writes.row_exists(conn, memory_id):
                    raise TreeRefused("not_found", "No such memory.")
                await conn.execute(insert(t.grants).values(_grant_row(grant, now_ms())))
            self.tree.add_grant(grant)

        async with self.tree_lock.held():
            self.claims.refuse_if_deleting(memory_id)
            await to_the_end(write())
        return grant

    async def remove_grant(self, grant_id: str) -> Grant | None:
        async def write() -> Grant | None:
            async with self.engine.begin() as conn:
                await tree_writes.lock_tree(conn)
                await conn.execute(delete(t.grants).where(t.grants.c.id == grant_id))
            return self.tree.remove_grant(grant_id)

        async with self.tree_lock.held():
            held = self.tree.grant(grant_id)
            self.claims.refuse_if_deleting(held.memory_id if held else None)
            return await to_the_end(write())

    # ------------------------------------------------------------------ rows kept only in SQL

    async def insert(self, table: Any, **values: Any) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(insert(table).values(**values))

    async def fetch_one(self, table: Any, **where: Any) -> Any:
        async with self.engine.connect() as conn:
            query = select(table).where(*(table.c[k] == v for k, v in where.items()))
            return (await conn.execute(query)).first()

    async def fetch_all(self, table: Any, order_by: Any = None, **where: Any) -> list[Any]:
        async with self.engine.connect() as conn:
            query = select(table).where(*(table.c[k] == v for k, v in where.items()))
            if order_by is not None:
                query = query.order_by(order_by)
            return list(await conn.execute(query))

    async def delete_rows(self, table: Any, **where: Any) -> int:
        async with self.engine.begin() as conn:
            result = await conn.execute(delete(table).where(*(table.c[k] == v for k, v in where.items())))
        return int(result.rowcount or 0)


def _engine(url: str, search_path: str | None) -> AsyncEngine:
    kwargs: dict[str, Any] = {}
    if url.startswith("postgresql") and search_path:
        kwargs["connect_args"] = {"server_settings": {"search_path": search_path}}
    engine = create_async_engine(url, **kwargs)
    if url.startswith("sqlite"):
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers run beside a writer, and synchronous=NORMAL commits without an fsync per
    # transaction (a commit survives a crash of the process; a power cut may lose the last few).
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _node(row: Any) -> MemoryNode:
    return MemoryNode(row.id, row.name, row.description, row.parent_id, bool(row.restricted), row.provider,
                      row.created_by, row.created_at, row.updated_at)


def _grant(row: Any) -> Grant:
    return Grant(row.id, row.memory_id, row.principal, _privs_from_text(row.privileges), bool(row.implicit))


def _grant_row(grant: Grant, stamp: int) -> dict[str, Any]:
    return {
        "id": grant.id, "memory_id": grant.memory_id, "principal": grant.principal,
        "privileges": _privs_to_text(grant.privileges), "implicit": grant.implicit, "created_at": stamp,
    }
