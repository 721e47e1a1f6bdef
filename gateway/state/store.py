"""The state store: members, keys, groups, memories and grants in SQL, mirrored in memory.

Every change is committed to the database first and then applied to the in-memory indexes, so a
request never sees a change that a crash could lose. Reads on the request path (who is this key,
which groups, the tree) come from memory.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from gateway.base.clock import now_ms
from gateway.base.ids import new_id
from gateway.state import coherence, startup, tables, tree_writes
from gateway.state import schema as t
from gateway.state.consolidations import ConsolidationRuns
from gateway.state.directory import KEY_PREFIX, Directory, GroupRow, Member, hash_key, member_of_row
from gateway.state.engine import chunks, open_engine, ping, wal_ready
from gateway.state.entries import EntryPoints
from gateway.state.harnesses import Harnesses, PrimeLog
from gateway.state.loading import LoadProgress, load_tree
from gateway.state.newest import NewestProbe
from gateway.state.queries import NamedQueries
from gateway.state.records import RecordAliases, Snapshots
from gateway.state.rows import Rows, grant_row, node_row
from gateway.state.tree import MemoryNode, Tree
from gateway.state.tree_writes import Claims, TreeLock, TreeRefused, to_the_end
from gateway.state.version_probe import VersionProbe
from gateway.telemetry import metrics
from policies.access import PRIVILEGES, Grant

Creator = Callable[[AsyncConnection], Awaitable[None]]  # makes more tables, inside the startup transaction


class StateStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.tree = Tree()
        self.entries = EntryPoints(self.tree)  # each caller's entry points, kept per version of the tree
        # Tree changes one at a time (gateway/state/tree_writes.py): a route holds the lock from its checks
        # to its write; a delete claims its subtree while the providers drop its records.
        self.tree_lock = TreeLock()
        self.claims = Claims()
        self.directory = Directory()
        self.changes = coherence.ChangeMark()
        # What catch_up asks before every decision: a local SQLite file directly on the loop's thread
        # (gateway/state/newest.py), else one held connection shared by requests (version_probe.py).
        self._newest = NewestProbe(engine.url)
        self.version_probe = VersionProbe(engine)
        self.first_admin: tuple[str, str] | None = None  # (member id, key) of the first admin `open` made
        # The typed repositories routes call (routes build no SQL): one per concept, each over this engine.
        self.snapshots, self.aliases = Snapshots(engine), RecordAliases(engine)
        self.queries = NamedQueries(engine)
        self.harnesses, self.prime_log = Harnesses(engine), PrimeLog(engine)
        self.consolidations = ConsolidationRuns(engine)
        self.rows = Rows(engine)  # rows kept only in SQL, of tables no repository owns yet

    @classmethod
    async def open(cls, url: str, *, search_path: str | None = None, schemas: Sequence[Creator] = (),
                   first_admin: str | None = None, progress: LoadProgress | None = None) -> StateStore:
        """The store on `url`, loaded; StateCorrupt when its memories are not a tree.

        Its tables, those `schemas` create (the decision log's) and, given `first_admin` (a key, or "" for
        a new one), the first admin of an empty store are made under the startup lock (gateway/state/
        startup.py), so replicas starting together make them once; `first_admin` is what it made."""
        await wal_ready(url)
        engine = open_engine(url, search_path)
        try:
            async with engine.begin() as conn:
                await startup.hold_startup_lock(conn)
                await tables.create_all(conn)
                for create in schemas:
                    await create(conn)
                made = await startup.make_first_admin(conn, first_admin or None) if first_admin is not None else None
            store = cls(engine)
            store.first_admin = made
            await store._load(progress)
        except BaseException:
            await engine.dispose()
            raise
        return store

    @classmethod
    async def check_tree(cls, url: str, *, search_path: str | None = None) -> None:
        """StateCorrupt when the memories' parent links are not a tree; reads only those, creates nothing."""
        engine = open_engine(url, search_path)
        try:
            await tree_writes.check_links(engine)
        finally:
            await engine.dispose()

    async def close(self) -> None:
        await self.entries.close()
        self._newest.close()
        await self.version_probe.close()
        await self.engine.dispose()

    async def ping(self) -> None:
        """Returns when the database answers (the readiness probe); raises the driver's error otherwise."""
        await ping(self.engine)

    async def _load(self, progress: LoadProgress | None = None) -> None:
        directory = Directory()
        async with self.engine.connect() as conn:
            mark = await coherence.latest(conn)  # before the rows: a change landing meanwhile is applied again
            for row in await conn.execute(select(t.members)):
                directory.put_member(member_of_row(row), row.external_subject)
            for row in await conn.execute(select(t.api_keys)):
                directory.put_key(row.key_hash, row.id, row.member_id)
            for row in await conn.execute(select(t.groups)):
                directory.put_group(GroupRow(row.id, row.name, row.created_at))
            for row in await conn.execute(select(t.group_members)):
                directory.join(row.group_id, row.member_id)
            tree = await load_tree(conn, progress)  # in chunks, letting the event loop run between them
        self.directory = directory
        self.tree.replace_with(tree)
        self.changes.seen = mark

    async def catch_up(self) -> None:
        """Apply what other instances changed since this one last looked (gateway/state/coherence.py)."""
        newest = self._newest.newest()
        if newest is None:
            newest = await self.version_probe.newest()
        if newest <= max(self.changes.seen, self.changes.committing):
            return
        async with self.changes.lock:
            if newest <= self.changes.seen:
                return  # another request applied it while this one waited
            async with self.engine.connect() as conn:
                found = await coherence.since(conn, self.changes.seen)
                if found.gap:
                    await self._load()
                    self.entries.prepare()  # the tops of the grants just loaded, found in steps from now on
                    return
                fetched = await coherence.fetch(conn, found)
            coherence.apply(self.directory, self.tree, found, fetched)  # no await: one consistent step
            crossed = found.upto // coherence.PRUNE_EVERY != self.changes.seen // coherence.PRUNE_EVERY
            self.changes.seen = found.upto
            self.changes.applied_at = now_ms()
            metrics.coherence_lag((self.changes.applied_at - found.newest_at) / 1000)
        if crossed:
            async with self.engine.begin() as conn:
                await coherence.prune(conn)

    # ------------------------------------------------------------------ members and keys

    def member(self, member_id: str) -> Member | None:
        return self.directory.member(member_id)

    def member_count(self) -> int:
        return self.directory.member_count()

    async def make_first_admin(self, given: str | None) -> str | None:
        """The first admin of an empty store (under the startup lock) and its key's secret; None if there
        are members already."""
        async with self.engine.begin() as conn:
            await startup.hold_startup_lock(conn)
            made = await startup.make_first_admin(conn, given)
        if made is None:
            return None
        async with self.engine.connect() as conn:  # the rows as written: member and key
            member = (await conn.execute(select(t.members).where(t.members.c.id == made[0]))).one()
            key = (await conn.execute(select(t.api_keys).where(t.api_keys.c.member_id == made[0]))).one()
        self.directory.put_member(member_of_row(member))
        self.directory.put_key(key.key_hash, key.id, member.id)
        return made[1]

    def member_for_key(self, secret: str) -> Member | None:
        return self.directory.member_for_digest(hash_key(secret))

    def member_for_subject(self, subject: str) -> Member | None:
        return self.directory.member_for_subject(subject)

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
            await coherence.record(conn, "member", [member.id])
        self.directory.put_member(member, external_subject)
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
            member = member_of_row(row)
            self.directory.put_member(member, subject)
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
            await coherence.record(conn, "keys", [member_id])
        self.directory.put_key(digest, key_id, member_id)
        return key_id, secret

    async def revoke_key(self, member_id: str, key_id: str) -> bool:
        async with self.engine.begin() as conn:
            result = await conn.execute(
                delete(t.api_keys).where(t.api_keys.c.id == key_id, t.api_keys.c.member_id == member_id)
            )
            if result.rowcount:
                await coherence.record(conn, "keys", [member_id])
        if not result.rowcount:
            return False
        self.directory.drop_key(key_id)
        return True

    def keys_of(self, member_id: str) -> list[str]:
        return self.directory.keys_of(member_id)

    # ------------------------------------------------------------------ groups

    def group(self, group_id: str) -> GroupRow | None:
        return self.directory.group(group_id)

    def group_by_name(self, name: str) -> GroupRow | None:
        return self.directory.group_by_name(name)

    def groups_of(self, member_id: str) -> tuple[str, ...]:
        return self.directory.groups_of(member_id)

    def members_of(self, group_id: str) -> tuple[str, ...]:
        return self.directory.members_of(group_id)

    async def create_group(self, name: str) -> GroupRow:
        group = GroupRow(new_id("group"), name, now_ms())
        async with self.engine.begin() as conn:
            await conn.execute(insert(t.groups).values(id=group.id, name=name, created_at=group.created_at))
            await coherence.record(conn, "group", [group.id])
        self.directory.put_group(group)
        return group

    async def add_to_group(self, group_id: str, member_id: str) -> None:
        if self.directory.belongs(group_id, member_id):
            return
        try:
            async with self.engine.begin() as conn:
                await conn.execute(insert(t.group_members).values(group_id=group_id, member_id=member_id))
                await coherence.record(conn, "memberships", [member_id])
        except IntegrityError:  # a concurrent request added it first (or the group went meanwhile)
            async with self.engine.connect() as conn:
                kept = (await conn.execute(select(t.group_members.c.member_id).where(
                    t.group_members.c.group_id == group_id, t.group_members.c.member_id == member_id))).first()
            if kept is None:
                raise
        self.directory.join(group_id, member_id)

    async def remove_from_group(self, group_id: str, member_id: str) -> bool:
        if not self.directory.belongs(group_id, member_id):
            return False
        async with self.engine.begin() as conn:
            await conn.execute(
                delete(t.group_members).where(
                    t.group_members.c.group_id == group_id, t.group_members.c.member_id == member_id
                )
            )
            await coherence.record(conn, "memberships", [member_id])
        self.directory.leave(group_id, member_id)
        return True

    async def set_groups(self, member_id: str, group_ids: set[str]) -> None:
        """Make the member's groups exactly these (used for groups asserted by an identity provider)."""
        current = set(self.directory.groups_of(member_id))
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
                await conn.execute(insert(t.memories).values(node_row(node)))
                await conn.execute(insert(t.grants).values(grant_row(grant, stamp)))
                await coherence.record(conn, "memory", [node.id])
                await coherence.record(conn, "grants", [node.id])
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
                await coherence.record(conn, "memory", [memory_id])
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
                for chunk in chunks(ids, 500):
                    await conn.execute(delete(t.grants).where(t.grants.c.memory_id.in_(chunk)))
                    await conn.execute(delete(t.snapshots).where(t.snapshots.c.memory_id.in_(chunk)))
                    await conn.execute(delete(t.record_aliases).where(t.record_aliases.c.memory_id.in_(chunk)))
                    await conn.execute(delete(t.memories).where(t.memories.c.id.in_(chunk)))
                await coherence.record(conn, "memory", ids)
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
                await conn.execute(insert(t.grants).values(grant_row(grant, now_ms())))
                await coherence.record(conn, "grants", [memory_id])
            self.tree.add_grant(grant)

        async with self.tree_lock.held():
            self.claims.refuse_if_deleting(memory_id)
            await to_the_end(write())
        return grant

    async def remove_grant(self, grant_id: str) -> Grant | None:
        async def write() -> Grant | None:
            async with self.engine.begin() as conn:
                await tree_writes.lock_tree(conn)
                gone = (await conn.execute(delete(t.grants).where(t.grants.c.id == grant_id)
                                           .returning(t.grants.c.memory_id))).all()
                await coherence.record(conn, "grants", [row.memory_id for row in gone])
            return self.tree.remove_grant(grant_id)

        async with self.tree_lock.held():
            held = self.tree.grant(grant_id)
            self.claims.refuse_if_deleting(held.memory_id if held else None)
            return await to_the_end(write())
