"""Who is asking: a bearer credential becomes a Principal (the member, its type and its groups).

Two credentials are accepted side by side: memfed's own API keys (`mf_…`, stored only as hashes) and,
when `[auth.oidc]` is configured, JWTs from the enterprise's identity provider. Both are resolved on
every request; nothing is cached per connection, so a revoked key or a changed group takes effect at
once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from starlette.requests import Request

from gateway.base.errors import ApiError, invalid_credentials

if TYPE_CHECKING:
    from gateway.identity.oidc import OidcVerifier
    from gateway.state.directory import Member
    from gateway.state.store import StateStore


class Identities(Protocol):
    """Where a token's member is found (the app's services, gateway/services.py): the state store's keys,
    and OIDC with first-sight provisioning where it is configured."""

    @property
    def store(self) -> StateStore: ...

    @property
    def oidc(self) -> OidcVerifier | None: ...

    async def member_for_jwt(self, token: str) -> Member | None: ...


@dataclass(frozen=True)
class Principal:
    member_id: str
    name: str
    type: str
    is_admin: bool
    groups: tuple[str, ...]

    @property
    def principal(self) -> str:
        return f"member:{self.member_id}"

    @property
    def principals(self) -> frozenset[str]:
        """Every grant principal that speaks for this caller: itself and each of its groups."""
        return frozenset((self.principal, *(f"group:{g}" for g in self.groups)))


def unauthenticated(message: str = "A valid bearer credential is required.") -> ApiError:
    return invalid_credentials(message)


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def authenticate(request: Request, services: Identities) -> Principal:
    token = bearer_token(request.headers.get("authorization"))
    if token is None:
        raise unauthenticated()
    principal = await resolve_token(token, services)
    if principal is None:
        raise unauthenticated()
    return principal


async def resolve_token(token: str, services: Identities) -> Principal | None:
    """The principal a bearer token stands for, or None. Shared by the HTTP API and MCP."""
    store = services.store
    await store.catch_up()  # decide from the state as it is now, whichever instance changed it
    member = store.member_for_key(token)
    if member is None and services.oidc is not None and services.oidc.looks_like_jwt(token):
        member = await services.member_for_jwt(token)
    if member is None:
        return None
    return Principal(member.id, member.name, member.type, member.is_admin, store.groups_of(member.id))
