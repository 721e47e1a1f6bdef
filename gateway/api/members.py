"""Members, their API keys, and groups. Admin-only except `GET /v1/members/me`.

People and agents are both members; `type` is carried for readers and no rule depends on it.
"""

from __future__ import annotations

from typing import Any

from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require_admin
from gateway.api.models import CreateGroup, CreateMember
from gateway.api.responses import Deleted, GroupOut, KeyOut, MemberOut
from gateway.base.errors import group_exists, group_not_found, key_not_found, member_not_found, not_a_member
from gateway.identity.auth import unauthenticated
from gateway.state.directory import GroupRow, Member

ADMIN_INVALID = "memfed_invalid_request"


def member_json(member: Member, groups: tuple[str, ...], keys: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": member.id, "object": "member", "name": member.name, "type": member.type,
        "admin": member.is_admin, "principal": member.principal, "groups": list(groups),
        "created_at": member.created_at // 1000,
    }
    if keys is not None:
        out["keys"] = [{"id": k} for k in keys]
    return out


def _member_or_404(call: Call) -> Member:
    member = call.services.store.member(call.path["member_id"])
    if member is None:
        raise member_not_found()
    return member


async def create_member(call: Call) -> dict[str, Any]:
    require_admin(call, "members.create")
    body = call.body_as(CreateMember)
    member = await call.services.store.create_member(body.name, body.type, is_admin=body.admin)
    return member_json(member, ())


async def get_me(call: Call) -> dict[str, Any]:
    store = call.services.store
    member = store.member(call.authenticated().member_id)
    if member is None:  # a credential that stands for no member is no credential
        raise unauthenticated()
    return member_json(member, call.authenticated().groups, store.keys_of(member.id))


async def get_member(call: Call) -> dict[str, Any]:
    require_admin(call, "members.get")
    member = _member_or_404(call)
    store = call.services.store
    return member_json(member, store.groups_of(member.id), store.keys_of(member.id))


async def create_key(call: Call) -> dict[str, Any]:
    require_admin(call, "keys.create")
    member = _member_or_404(call)
    key_id, secret = await call.services.store.create_key(member.id)
    # The only time the secret is ever shown: it is stored as a hash.
    return {"id": key_id, "object": "api_key", "member_id": member.id, "key": secret}


async def revoke_key(call: Call) -> dict[str, Any]:
    require_admin(call, "keys.revoke")
    member = _member_or_404(call)
    if not await call.services.store.revoke_key(member.id, call.path["key_id"]):
        raise key_not_found()
    return {"id": call.path["key_id"], "object": "api_key", "deleted": True}


async def create_group(call: Call) -> dict[str, Any]:
    require_admin(call, "groups.create")
    body = call.body_as(CreateGroup)
    store = call.services.store
    if store.group_by_name(body.name) is not None:
        raise group_exists()
    group = await store.create_group(body.name)
    return {"id": group.id, "object": "group", "name": group.name, "principal": f"group:{group.id}",
            "members": []}


def _group_and_member(call: Call) -> tuple[GroupRow, str]:
    store = call.services.store
    group = store.group(call.path["group_id"])
    if group is None:
        raise group_not_found()
    member = store.member(call.path["member_id"])
    if member is None:
        raise member_not_found()
    return group, member.id


def _group_json(call: Call, group: GroupRow) -> dict[str, Any]:
    store = call.services.store
    return {"id": group.id, "object": "group", "name": group.name, "principal": f"group:{group.id}",
            "members": list(store.members_of(group.id))}


async def get_group(call: Call) -> dict[str, Any]:
    require_admin(call, "groups.get")
    group = call.services.store.group(call.path["group_id"])
    if group is None:
        raise group_not_found()
    return _group_json(call, group)


async def add_to_group(call: Call) -> dict[str, Any]:
    require_admin(call, "groups.add_member")
    group, member_id = _group_and_member(call)
    await call.services.store.add_to_group(group.id, member_id)
    return _group_json(call, group)


async def remove_from_group(call: Call) -> dict[str, Any]:
    require_admin(call, "groups.remove_member")
    group, member_id = _group_and_member(call)
    if not await call.services.store.remove_from_group(group.id, member_id):
        raise not_a_member()
    return _group_json(call, group)


ENDPOINTS = [
    Endpoint("POST", "/v1/members", create_member, "Create a member (a person or an agent).", "members.create",
             body=CreateMember, response=MemberOut, status=201, write=True, invalid_code=ADMIN_INVALID,
             tags=("members",)),
    Endpoint("GET", "/v1/members/me", get_me, "The calling member.", "members.me", response=MemberOut,
             tags=("members",)),
    Endpoint("GET", "/v1/members/{member_id}", get_member, "One member.", "members.get", response=MemberOut,
             tags=("members",)),
    Endpoint("POST", "/v1/members/{member_id}/keys", create_key, "Mint an API key (shown once).",
             "keys.create", response=KeyOut, status=201, tags=("members",)),
    Endpoint("DELETE", "/v1/members/{member_id}/keys/{key_id}", revoke_key, "Revoke an API key.",
             "keys.revoke", response=Deleted, tags=("members",)),
    Endpoint("POST", "/v1/groups", create_group, "Create a group.", "groups.create", body=CreateGroup,
             response=GroupOut, status=201, write=True, invalid_code=ADMIN_INVALID, tags=("groups",)),
    Endpoint("GET", "/v1/groups/{group_id}", get_group, "One group and its members.", "groups.get",
             response=GroupOut, tags=("groups",)),
    Endpoint("PUT", "/v1/groups/{group_id}/members/{member_id}", add_to_group, "Put a member in a group.",
             "groups.add_member", response=GroupOut, tags=("groups",)),
    Endpoint("DELETE", "/v1/groups/{group_id}/members/{member_id}", remove_from_group,
             "Take a member out of a group.", "groups.remove_member", response=GroupOut, tags=("groups",)),
]
