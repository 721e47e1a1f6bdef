"""OIDC bearer JWT verification (gateway/identity/oidc.py) against real keys and a JWKS served from loopback.

Keys are generated here with `cryptography`; the JWKS is served by a real HTTP server on 127.0.0.1 and
fetched by a real httpx.AsyncClient. Time for the cache and the refetch limit is a fake monotonic clock
the tests advance; token times (exp, nbf) are real wall-clock times.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from joserfc import jwk, jwt

from gateway.identity.oidc import InvalidToken, OidcSettings, OidcUnavailable, OidcVerifier, VerifiedIdentity

ISSUER = "https://idp.example.test/realms/memfed"
AUDIENCE = "memfed-gateway"


# --- keys and tokens -------------------------------------------------------------------------------


def rsa_key(kid: str) -> jwk.RSAKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return jwk.RSAKey.import_key(private, {"kid": kid, "use": "sig", "alg": "RS256"})


def ec_key(kid: str) -> jwk.ECKey:
    return jwk.ECKey.import_key(ec.generate_private_key(ec.SECP256R1()), {"kid": kid, "use": "sig"})


@pytest.fixture(scope="module")
def rsa_a() -> jwk.RSAKey:
    return rsa_key("rsa-a")


@pytest.fixture(scope="module")
def rsa_b() -> jwk.RSAKey:
    return rsa_key("rsa-b")


@pytest.fixture(scope="module")
def ec_a() -> jwk.ECKey:
    return ec_key("ec-a")


def jwks(*keys: jwk.Key) -> dict[str, Any]:
    return {"keys": [k.as_dict(private=False) for k in keys]}


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    base: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "sub": "ana", "iat": now, "exp": now + 600}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}  # None removes a claim


def sign(key: jwk.Key, payload: dict[str, Any], alg: str = "RS256", kid: str | None = "") -> str:
    header = {"alg": alg, "kid": key.kid if kid == "" else kid}
    return jwt.encode({k: v for k, v in header.items() if v is not None}, payload, key, algorithms=[alg])


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def segment(value: dict[str, Any]) -> str:
    return b64(json.dumps(value).encode())


# --- the JWKS server on loopback and the verifier ----------------------------------------------------


class JwksServer:
    """Serves `document` at /jwks on 127.0.0.1 and counts the requests it answered."""

    def __init__(self) -> None:
        self.document: dict[str, Any] = {"keys": []}
        self.status = 200
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                body = json.dumps(server.document).encode()
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/jwks"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def server() -> Iterator[JwksServer]:
    s = JwksServer()
    yield s
    s.close()


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(trust_env=False, timeout=5.0) as c:
        yield c


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make_verifier(client: httpx.AsyncClient, clock: FakeClock, url: str | None = None,
                  file: str | None = None, **settings: Any) -> OidcVerifier:
    oidc = OidcSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=url, jwks_file=file, **settings)
    return OidcVerifier(oidc, client, clock=clock)


async def refused(verifier: OidcVerifier, token: str) -> str:
    """Verify, expect a refusal, check the token is not echoed, and return the reason."""
    with pytest.raises(InvalidToken) as caught:
        await verifier.verify(token)
    assert token not in str(caught.value)
    assert token not in caught.value.detail
    return caught.value.reason


# --- tokens that are good ------------------------------------------------------------------------------


async def test_valid_token_names_the_member_with_type_and_groups_from_claims(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey) -> None:
    """A valid RS256 token acts as its `sub`, with `type` and de-duplicated groups taken from claims."""
    server.document = jwks(rsa_a)
    verifier = make_verifier(client, clock, server.url, type_claim="memfed_type")
    payload = claims(memfed_type="agent", groups=["eng", "ops", "eng"])
    identity = await verifier.verify(sign(rsa_a, payload))
    assert identity == VerifiedIdentity(subject="ana", member_type="agent", groups=("eng", "ops"),
                                        issuer=ISSUER, expires_at=payload["exp"])


async def test_type_defaults_to_human_and_audience_may_be_a_list(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, ec_a: jwk.ECKey) -> None:
    """An ES256 token without the type claim is a human; `aud` as a list containing ours is accepted."""
    server.document = jwks(ec_a)
    verifier = make_verifier(client, clock, server.url, type_claim="memfed_type")
    identity = await verifier.verify(sign(ec_a, claims(aud=["other-api", AUDIENCE]), alg="ES256"))
    assert (identity.subject, identity.member_type, identity.groups) == ("ana", "human", ())


async def test_member_and_groups_claims_are_configurable(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey) -> None:
    """member_claim picks the member's name; a single-string groups claim is one group."""
    server.document = jwks(rsa_a)
    verifier = make_verifier(client, clock, server.url, member_claim="email",
                             groups_claim="https://memfed.example/groups")
    token = sign(rsa_a, claims(email="ana@example.test", **{"https://memfed.example/groups": "eng"}))
    identity = await verifier.verify(token)
    assert (identity.subject, identity.groups) == ("ana@example.test", ("eng",))


async def test_expiry_within_leeway_is_accepted(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey) -> None:
    """A token that expired 10 s ago passes with the default 30 s leeway (clock skew)."""
    server.document = jwks(rsa_a)
    verifier = make_verifier(client, clock, server.url)
    identity = await verifier.verify(sign(rsa_a, claims(exp=int(time.time()) - 10)))
    assert identity.subject == "ana"


async def test_token_without_kid_uses_the_only_key_of_its_type(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey,
        ec_a: jwk.ECKey) -> None:
    """Without `kid`, the one RSA key of the set verifies an RS256 token."""
    server.document = jwks(rsa_a, ec_a)
    verifier = make_verifier(client, clock, server.url)
    identity = await verifier.verify(sign(rsa_a, claims(), kid=None))
    assert identity.subject == "ana"


# --- tokens that are refused ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"exp": -120}, "expired"),
        ({"nbf": 600}, "not_yet_valid"),
        ({"iat": 600}, "not_yet_valid"),
        ({"aud": "someone-else"}, "bad_audience"),
        ({"aud": ["someone-else", "another"]}, "bad_audience"),
        ({"iss": "https://evil.example.test/realms/memfed"}, "bad_issuer"),
        ({"iss": ISSUER + "/"}, "bad_issuer"),
        ({"sub": None}, "missing_claim"),
        ({"exp": None}, "missing_claim"),
        ({"aud": None}, "missing_claim"),
        ({"groups": ["eng", 7]}, "bad_claim"),
        ({"memfed_type": "robot"}, "bad_claim"),
    ],
    ids=["expired", "nbf-future", "iat-future", "wrong-aud", "wrong-aud-list", "wrong-iss",
         "iss-trailing-slash", "no-sub", "no-exp", "no-aud", "groups-not-strings", "unknown-type"],
)
async def test_bad_claims_are_refused_with_their_reason(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey,
        overrides: dict[str, Any], reason: str) -> None:
    """A correctly signed token whose claims are wrong is refused, and the reason names the claim."""
    server.document = jwks(rsa_a)
    verifier = make_verifier(client, clock, server.url, type_claim="memfed_type")
    now = int(time.time())
    timed = {k: now + v for k, v in overrides.items() if k in ("exp", "nbf", "iat") and v is not None}
    assert await refused(verifier, sign(rsa_a, claims(**{**overrides, **timed}))) == reason


@pytest.mark.parametrize("alg", ["none", "None", "NONE"])
async def test_unsigned_token_is_refused_before_any_key_lookup(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey, alg: str) -> None:
    """`alg: none` (any case, empty signature), crafted by hand, is unsigned; the JWKS is not fetched."""
    server.document = jwks(rsa_a)
    verifier = make_verifier(client, clock, server.url)
    token = f"{segment({'alg': alg, 'typ': 'JWT', 'kid': 'rsa-a'})}.{segment(claims())}."
    assert OidcVerifier.looks_like_jwt(token)
    assert await refused(verifier, token) == "unsigned"
    assert server.requests == 0


async def test_none_algorithm_with_a_signature_segment_is_still_unsigned(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey) -> None:
    """`alg: none` with junk in the signature segment is refused as unsigned, not tried against a key."""
    server.document = jwks(rsa_a)
    verifier = make_verifier(client, clock, server.url)
    token = f"{segment({'alg': 'none', 'kid': 'rsa-a'})}.{segment(claims())}.{b64(b'junk')}"
    assert await refused(verifier, token) == "unsigned"


async def test_hs256_signed_with_the_public_key_is_refused(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey) -> None:
    """The key-confusion attack (HS256 with the public key's PEM, or its JWK `n`, as the HMAC secret)
    is refused from the header alone: HS256 is not an allowed algorithm, and no JWKS fetch happens."""
    server.document = jwks(rsa_a)
    verifier = make_verifier(client, clock, server.url)
    public_pem = rsa_a.as_pem(private=False)
    modulus = rsa_a.as_dict()["n"]
    assert isinstance(modulus, str)  # a JWK's `n` is one base64url string
    for secret in (public_pem, modulus.encode()):
        signing_input = f"{segment({'alg': 'HS256', 'typ': 'JWT', 'kid': 'rsa-a'})}.{segment(claims())}"
        mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
        assert await refused(verifier, f"{signing_input}.{b64(mac)}") == "bad_algorithm"
    assert server.requests == 0


async def test_token_signed_by_another_key_with_the_same_kid_is_refused(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey,
        rsa_b: jwk.RSAKey) -> None:
    """A token claiming kid `rsa-a` but signed by a different private key fails the signature check."""
    server.document = jwks(rsa_a)
    verifier = make_verifier(client, clock, server.url)
    assert await refused(verifier, sign(rsa_b, claims(), kid="rsa-a")) == "bad_signature"


async def test_tampered_payload_is_refused(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey) -> None:
    """Swapping the payload of a genuine token (sub -> admin) breaks its signature."""
    server.document = jwks(rsa_a)
    verifier = make_verifier(client, clock, server.url)
    header, _, signature = sign(rsa_a, claims()).split(".")
    forged = f"{header}.{segment(claims(sub='admin', groups=['admins']))}.{signature}"
    assert await refused(verifier, forged) == "bad_signature"


async def test_ec_kid_with_rsa_algorithm_is_an_unknown_key(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, ec_a: jwk.ECKey,
        rsa_a: jwk.RSAKey) -> None:
    """A header pairing an EC key's kid with RS256 finds no RSA key of that kid."""
    server.document = jwks(ec_a)
    verifier = make_verifier(client, clock, server.url)
    assert await refused(verifier, sign(rsa_a, claims(), kid="ec-a")) == "unknown_key"


@pytest.mark.parametrize("token", ["mf_live_abc123", "abc", "a.b", "a.b.c.d.e", "!!.??.xx", "e30.e30.AAAA"])
async def test_non_jwt_and_garbage_are_malformed(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, token: str) -> None:
    """API keys, JWE-shaped strings and undecodable headers are malformed, with no JWKS fetch."""
    verifier = make_verifier(client, clock, server.url)
    assert await refused(verifier, token) == "malformed"
    assert server.requests == 0


def test_looks_like_jwt_separates_api_keys_from_jwts(rsa_a: jwk.RSAKey) -> None:
    """memfed API keys (`mf_...`) are not JWTs; a signed compact JWT is."""
    assert OidcVerifier.looks_like_jwt(sign(rsa_a, claims()))
    assert not OidcVerifier.looks_like_jwt("mf_0123456789abcdef")
    assert not OidcVerifier.looks_like_jwt("mf_a.b.c")
    assert not OidcVerifier.looks_like_jwt("not a token")


# --- the JWKS: cache, rotation, flood, file, outage ---------------------------------------------------


async def test_rotation_refetches_once_for_a_new_kid_and_then_uses_the_cache(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey,
        rsa_b: jwk.RSAKey) -> None:
    """A known kid is served from the cache (no request); after the IdP rotates to a new key, a token
    with the new kid verifies after exactly one refetch, and later ones use the cache again."""
    server.document = jwks(rsa_a)
    verifier = make_verifier(client, clock, server.url)
    await verifier.verify(sign(rsa_a, claims()))
    await verifier.verify(sign(rsa_a, claims(sub="bo")))
    assert server.requests == 1

    server.document = jwks(rsa_b)
    clock.advance(11)  # past the 10 s minimum between unscheduled fetches
    assert (await verifier.verify(sign(rsa_b, claims()))).subject == "ana"
    assert server.requests == 2
    await verifier.verify(sign(rsa_b, claims(sub="bo")))
    assert server.requests == 2
    # The retired key is gone from the new set; asking again so soon is rate limited.
    assert await refused(verifier, sign(rsa_a, claims())) == "unknown_key"
    assert server.requests == 2


async def test_cache_expires_after_jwks_cache_seconds(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey) -> None:
    """Even a known kid triggers a fresh fetch once the cached set is older than jwks_cache_seconds."""
    server.document = jwks(rsa_a)
    verifier = make_verifier(client, clock, server.url, jwks_cache_seconds=300)
    token = sign(rsa_a, claims())
    await verifier.verify(token)
    clock.advance(299)
    await verifier.verify(token)
    assert server.requests == 1
    clock.advance(2)
    await verifier.verify(token)
    assert server.requests == 2


async def test_flood_of_unknown_kids_makes_a_bounded_number_of_fetches(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey) -> None:
    """50 concurrent tokens with made-up kids cost the IdP one fetch; 50 more after the refetch interval
    cost one more. Every one of them is refused as unknown_key."""
    server.document = jwks(rsa_a)
    verifier = make_verifier(client, clock, server.url)

    async def flood(prefix: str) -> list[BaseException | VerifiedIdentity]:
        tokens = [sign(rsa_a, claims(), kid=f"{prefix}-{i}") for i in range(50)]
        return await asyncio.gather(*(verifier.verify(t) for t in tokens), return_exceptions=True)

    first = await flood("ghost")
    assert server.requests == 1
    clock.advance(11)
    second = await flood("phantom")
    assert server.requests == 2
    reasons = {r.reason if isinstance(r, InvalidToken) else repr(r) for r in first + second}
    assert reasons == {"unknown_key"}


async def test_jwks_file_is_read_cached_and_reread_for_a_new_kid(
        tmp_path: Path, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey,
        rsa_b: jwk.RSAKey) -> None:
    """With jwks_file the keys come from disk; a rewritten file supplies a rotated key."""
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks(rsa_a)))
    verifier = make_verifier(client, clock, file=str(path))
    assert (await verifier.verify(sign(rsa_a, claims()))).subject == "ana"
    path.write_text(json.dumps(jwks(rsa_a, rsa_b)))
    clock.advance(11)
    assert (await verifier.verify(sign(rsa_b, claims(sub="bo")))).subject == "bo"


async def test_jwks_unreachable_with_nothing_cached_is_unavailable(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey) -> None:
    """No JWKS ever fetched and the IdP answers 500: OidcUnavailable (the gateway's 503), not a 500 crash;
    the next request within the refetch interval does not ask again."""
    server.document, server.status = jwks(rsa_a), 500
    verifier = make_verifier(client, clock, server.url)
    token = sign(rsa_a, claims())
    with pytest.raises(OidcUnavailable):
        await verifier.verify(token)
    with pytest.raises(OidcUnavailable):
        await verifier.verify(token)
    assert server.requests == 1
    server.status = 200
    clock.advance(11)
    assert (await verifier.verify(token)).subject == "ana"


async def test_last_good_jwks_is_served_while_the_idp_is_down(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey) -> None:
    """After the cache expires, a failing refresh keeps the last good keys in use, retrying at most
    once per refetch interval."""
    server.document = jwks(rsa_a)
    verifier = make_verifier(client, clock, server.url)
    token = sign(rsa_a, claims())
    await verifier.verify(token)
    server.status = 503
    clock.advance(301)
    assert (await verifier.verify(token)).subject == "ana"
    assert (await verifier.verify(token)).subject == "ana"
    assert server.requests == 2


async def test_jwks_without_usable_keys_is_unavailable(
        server: JwksServer, client: httpx.AsyncClient, clock: FakeClock, rsa_a: jwk.RSAKey) -> None:
    """A JWKS holding only an encryption key and a symmetric key offers nothing to verify with."""
    enc = {**rsa_a.as_dict(private=False), "use": "enc"}
    server.document = {"keys": [enc, {"kty": "oct", "k": "c2VjcmV0", "kid": "rsa-a"}]}
    verifier = make_verifier(client, clock, server.url)
    with pytest.raises(OidcUnavailable):
        await verifier.verify(sign(rsa_a, claims()))


# --- settings -----------------------------------------------------------------------------------------


def test_from_toml_reads_a_full_table() -> None:
    """Every key of [auth.oidc] is read; algorithms become a tuple; an empty groups_claim turns groups off."""
    settings = OidcSettings.from_toml({
        "issuer": ISSUER, "audience": AUDIENCE, "jwks_url": "https://idp.example.test/jwks",
        "member_claim": "email", "type_claim": "memfed_type", "groups_claim": "",
        "algorithms": ["ES256"], "leeway_seconds": 5, "jwks_cache_seconds": 60,
        "jwks_min_refetch_seconds": 30,
    })
    assert settings == OidcSettings(
        issuer=ISSUER, audience=AUDIENCE, jwks_url="https://idp.example.test/jwks", jwks_file=None,
        member_claim="email", type_claim="memfed_type", groups_claim=None, algorithms=("ES256",),
        leeway_seconds=5, jwks_cache_seconds=60, jwks_min_refetch_seconds=30)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"jwks_url": "https://idp/jwks", "audiance": "x"}, "unknown keys ['audiance']"),
        ({"jwks_url": "https://idp/jwks", "jwks_file": "/etc/jwks.json"}, "exactly one of"),
        ({}, "exactly one of"),
        ({"jwks_url": "http://idp.example.test/jwks"}, "https"),
        ({"jwks_url": "https://idp/jwks", "algorithms": ["RS256", "HS256"]}, "HS256"),
        ({"jwks_url": "https://idp/jwks", "algorithms": ["none"]}, "none"),
        ({"jwks_url": "https://idp/jwks", "algorithms": "RS256"}, "list of strings"),
        ({"jwks_url": "https://idp/jwks", "leeway_seconds": True}, "integer"),
        ({"jwks_url": "https://idp/jwks", "jwks_cache_seconds": 0}, "jwks_cache_seconds >= 1"),
        ({"jwks_url": "https://idp/jwks", "type_claim": 3}, "type_claim must be a string"),
    ],
    ids=["unknown-key", "url-and-file", "neither", "plain-http", "hmac-alg", "none-alg", "alg-not-list",
         "bool-seconds", "zero-cache", "claim-not-string"],
)
def test_from_toml_refuses_bad_tables_with_a_clear_message(table: dict[str, Any], message: str) -> None:
    """A wrong [auth.oidc] table is a ValueError that names the problem."""
    with pytest.raises(ValueError, match=r"^\[auth\.oidc\]") as caught:
        OidcSettings.from_toml({"issuer": ISSUER, "audience": AUDIENCE, **table})
    assert message in str(caught.value)


def test_from_toml_requires_issuer_and_audience() -> None:
    """issuer and audience have no default."""
    with pytest.raises(ValueError, match=r"missing required keys \['audience'\]"):
        OidcSettings.from_toml({"issuer": ISSUER, "jwks_file": "/etc/jwks.json"})
