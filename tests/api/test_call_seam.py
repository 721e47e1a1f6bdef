"""The request object a route receives: its caller, its validated body and query, and the services it
reaches through a slot that the app fills once its lifespan (or `memfed serve`) has opened them."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from gateway.api._endpoint import Call
from gateway.api.members import get_me
from gateway.api.models import CreateGroup, CreateMember
from gateway.base.errors import ApiError
from gateway.identity.auth import Principal
from gateway.services import Services, ServicesSlot
from tests.api._gateway import Gateway


def _call(services: Services, principal: Principal | None, body: CreateGroup | None = None) -> Call:
    request = Request({"type": "http", "method": "GET", "path": "/v1/me", "headers": [], "query_string": b""})
    return Call(request, services, principal, body, None, {}, "req_test")


async def test_a_call_without_a_caller_asked_for_one_is_the_401_envelope(gateway: Gateway) -> None:
    """A public route's call carries no principal; asking it for the caller is the 401 a request without
    credentials gets (invalid_credentials, with WWW-Authenticate), never a server error."""
    call = _call(gateway.services, None)
    with pytest.raises(ApiError) as refused:
        call.authenticated()
    assert refused.value.status == 401 and refused.value.code == "invalid_credentials"
    assert refused.value.response().headers["www-authenticate"] == "Bearer"


async def test_an_authenticated_call_answers_its_caller(gateway: Gateway) -> None:
    """A call made with a principal answers that same principal."""
    who = Principal("mbr_x", "X", "human", False, ("g1",))
    assert _call(gateway.services, who).authenticated() is who


async def test_the_body_reads_as_the_routes_model_and_never_as_another(gateway: Gateway) -> None:
    """`body_as` answers the validated body as the model the route declared; asked for a model the route
    does not declare (a wiring bug), it raises instead of reading the wrong shape."""
    body = CreateGroup(name="Sales")
    call = _call(gateway.services, None, body)
    assert call.body_as(CreateGroup) is body
    with pytest.raises(TypeError, match="CreateGroup, not CreateMember"):
        call.body_as(CreateMember)
    with pytest.raises(TypeError, match="NoneType"):
        call.query_as(CreateGroup)


async def test_me_for_a_credential_that_names_no_member_is_401(gateway: Gateway) -> None:
    """`GET /v1/members/me` for a principal whose member the directory does not hold answers 401: a credential that
    stands for no member is no credential (not a 500 from reading a member that is not there)."""
    ghost = Principal("mbr_nobody", "Nobody", "human", False, ())
    with pytest.raises(ApiError) as refused:
        await get_me(_call(gateway.services, ghost))
    assert refused.value.status == 401 and refused.value.code == "invalid_credentials"


async def test_the_slot_answers_the_services_once_set_and_refuses_before(gateway: Gateway) -> None:
    """Routes built before the services are open look them up per request: the slot answers what was put
    in it, and before that says plainly that nothing is open (a request never gets this far: the
    readiness gate answers 503 until the services are open)."""
    slot = ServicesSlot()
    with pytest.raises(RuntimeError, match="not open"):
        slot.get()
    slot.current = gateway.services
    assert slot.get() is gateway.services


async def test_an_app_given_its_services_answers_through_the_slot(gateway: Gateway) -> None:
    """The app built around open services (tests, `create_app(services=…)`) puts them in its slot at once:
    a route answers on the first request."""
    assert gateway.app.state.slot.get() is gateway.services
    me = await gateway.admin.get("/v1/members/me")
    assert me.status_code == 200 and me.json()["admin"] is True
