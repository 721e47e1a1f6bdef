"""Everything a request handler needs, opened once by the app's lifespan and closed with it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from gateway.audit import AuditLog, Coverage, DecisionEntry
from gateway.base.clock import now
from gateway.base.config import Config, Limits
from gateway.base.errors import busy, identity_provider_unavailable
from gateway.federation.counts import RecordCounts
from gateway.federation.fairness import MemberLimits
from gateway.federation.idempotency import Idempotency
from gateway.federation.plans import RecallPlans
from gateway.federation.providers import Providers
from gateway.identity.auth import Principal
from gateway.state.directory import Member
from gateway.state.files import FileStore
from gateway.state.store import StateStore

if TYPE_CHECKING:
    from gateway.identity.oidc import OidcVerifier

log = logging.getLogger("memfed.services")


class Call(Protocol):
    """What the decision log needs of a request (the routes' request object, gateway/api/_endpoint.py):
    who asks, the request's ids, and the decisions waiting to be journaled before its answer leaves."""

    principal: Principal | None
    request_id: str
    client_request_id: str | None
    decisions: list[tuple[DecisionEntry, Sequence[Coverage]]] | None

    def authenticated(self) -> Principal: ...


@dataclass
class Services:
    config: Config
    store: StateStore
    providers: Providers
    files: FileStore
    audit: AuditLog
    idempotency: Idempotency
    oidc: OidcVerifier | None = None
    openapi: dict[str, Any] = field(default_factory=dict)
    busy: dict[str, str] = field(default_factory=dict)  # memory id -> running consolidation run id
    counts: RecordCounts = field(default_factory=RecordCounts)
    plans: RecallPlans = field(default_factory=RecallPlans)
    limits: MemberLimits = field(default_factory=lambda: MemberLimits(Limits()))

    # -- what the observed gauges read (gateway/telemetry/metrics.py)

    def breaker_states(self) -> list[tuple[str, str]]:
        return [(name, handle.breaker.state) for name, handle in list(self.providers.handles.items())]

    def audit_backlog(self) -> int:
        return self.audit.backlog()

    def tree_size(self) -> int:
        return len(self.store.tree)

    def written(self, memory_id: str) -> None:
        """A write through the gateway changed this memory's records: its cached count is stale."""
        self.counts.written(memory_id)

    def guard_not_busy(self, memory_id: str) -> None:
        """A move or delete must wait while a consolidation runs on the memory or below it (§12)."""

        tree = self.store.tree
        for busy_id, run_id in self.busy.items():
            if tree.exists(busy_id) and tree.is_descendant(busy_id, memory_id):
                raise busy("A consolidation run is changing this memory.", detail={"consolidation_id": run_id})

    def decide(self, call: Call, operation: str, memory_id: str | None, privilege: str | None,
               allowed: bool, reason: str) -> None:
        self.decide_many(call, [(operation, memory_id, privilege, allowed, reason)])

    def decide_many(self, call: Call, decisions: list[tuple[str, str | None, str | None, bool, str]]) -> None:
        """Several decisions of one request, `(operation, memory, privilege, allowed, reason)`."""
        if not self.audit.enabled:
            return
        principal = call.principal
        who = principal.principal if principal else "anonymous"
        groups = tuple(f"group:{g}" for g in principal.groups) if principal else ()
        rid, at = call.request_id, now()  # one request's decisions share its moment
        client = call.client_request_id
        self._journal(call, [(DecisionEntry(rid, who, groups, operation, memory_id, privilege, allowed, reason, at,
                                            client), ())
                             for operation, memory_id, privilege, allowed, reason in decisions])

    def decide_plan(self, call: Call, operation: str, memory_id: str, privilege: str, sets: list[Coverage]) -> None:
        """A recall's plan: its decisions, one per memory, as coverage sets (gateway.audit.chain)."""
        if not self.audit.enabled or not sets:
            return
        principal = call.authenticated()  # a plan is a recall's, and recall is never a public route
        count = sum(c.count for c in sets)
        entry = DecisionEntry(call.request_id, principal.principal, tuple(f"group:{g}" for g in principal.groups),
                              operation, memory_id, privilege, True,
                              f"decided on {count} memories below and at this one: see the coverage set",
                              client_request_id=call.client_request_id)
        self._journal(call, [(entry, sets)])

    def _journal(self, call: Call, decided: list[tuple[DecisionEntry, Sequence[Coverage]]]) -> None:
        # An HTTP request's decisions wait on the call and go to the journal in one write before its answer
        # leaves (gateway.api._endpoint); anything else is journaled at once.
        pending = call.decisions
        if pending is not None:
            pending.extend(decided)
        else:
            self.audit.record(decided)

    def journal_pending(self, call: Call) -> None:
        """Journal what a request decided so far and journal later decisions at once (a streamed answer)."""
        pending, call.decisions = call.decisions, None
        if pending:
            self.audit.record(pending)

    async def member_for_jwt(self, token: str) -> Member | None:
        """The member a verified JWT names, created on first sight; its groups follow the token's claim."""
        from gateway.identity.oidc import InvalidToken, OidcUnavailable

        if self.oidc is None:  # only a configured identity provider's tokens are JWTs the gateway reads
            return None
        try:
            identity = await self.oidc.verify(token)
        except InvalidToken as exc:
            log.info("refused a bearer JWT: %s", exc.reason)
            return None
        except OidcUnavailable:
            # The token may well be valid: a 401 would tell the client to drop working credentials.
            raise identity_provider_unavailable() from None
        subject = f"{identity.issuer}#{identity.subject}"
        member = await self.store.member_signing_in(identity.subject, identity.member_type, subject)
        wanted = set()
        for name in identity.groups:
            group = self.store.group_by_name(name)
            if group is not None:
                wanted.add(group.id)
        await self.store.set_groups(member.id, wanted)
        return member

    async def close(self) -> None:
        await self.audit.close()
        await self.providers.close()
        await self.store.close()


class ServicesSlot:
    """Where an app's services are once opened. Its routes, console and MCP are built before the lifespan
    (or `memfed serve`) opens them, and look them up here per request."""

    def __init__(self, services: Services | None = None) -> None:
        self.current = services

    def get(self) -> Services:
        if self.current is None:  # the readiness gate refuses requests before this; reaching here is a bug
            raise RuntimeError("the gateway's services are not open yet")
        return self.current
