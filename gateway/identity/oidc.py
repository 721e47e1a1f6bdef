"""Verify OIDC bearer JWTs against the issuer's JWKS.

This module only answers "is this token good, and whom does it name?". Creating the member on first
sight and mapping group names onto memfed's groups happen in gateway/identity/auth.py with what it returns.

JOSE comes from joserfc: authlib 1.x marks its own `authlib.jose` deprecated in favour of joserfc (same
author), which authlib itself depends on.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
from cachetools import TTLCache
from joserfc import errors, jwk, jwt
from joserfc.jws import JWSRegistry

# Only asymmetric algorithms: a JWKS is public, so an HMAC "key" taken from it is known to everyone.
_ASYMMETRIC = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
                         "ES256K", "EdDSA", "Ed25519", "Ed448"})
_JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
_LOOPBACK = ("127.0.0.1", "::1", "localhost")
_MAX_TOKEN_CHARS = 16_384  # refuse before any decoding work; real tokens are a few KB at most


@dataclass(frozen=True)
class OidcSettings:
    """`[auth.oidc]`. Claim names are top-level claim names taken literally (namespaced claims such as
    `https://example.com/groups` contain dots, so no dotted paths). `groups_claim = ""` disables groups."""

    issuer: str
    audience: str
    jwks_url: str | None
    jwks_file: str | None
    member_claim: str = "sub"
    type_claim: str | None = None
    groups_claim: str | None = "groups"
    algorithms: tuple[str, ...] = ("RS256", "ES256", "PS256", "EdDSA")
    leeway_seconds: int = 30
    jwks_cache_seconds: int = 300
    # At most one unscheduled JWKS fetch (unknown kid, or retry after a failure) per this many seconds.
    jwks_min_refetch_seconds: int = 10

    def __post_init__(self) -> None:
        if not self.issuer or not self.audience or not self.member_claim:
            raise ValueError("[auth.oidc]: issuer, audience and member_claim must be non-empty")
        if (self.jwks_url is None) == (self.jwks_file is None):
            raise ValueError("[auth.oidc]: set exactly one of jwks_url and jwks_file")
        if self.jwks_url is not None:
            url = urlsplit(self.jwks_url)
            # Plain http would let anyone on the path substitute their own signing keys.
            if not (url.scheme == "https" or (url.scheme == "http" and url.hostname in _LOOPBACK)):
                raise ValueError("[auth.oidc]: jwks_url must be https (http only on loopback)")
        bad = [a for a in self.algorithms if a not in _ASYMMETRIC]
        if not self.algorithms or bad:
            raise ValueError(f"[auth.oidc]: algorithms must be asymmetric JWS algorithms, refused: {bad}")
        if self.leeway_seconds < 0 or self.jwks_cache_seconds < 1 or self.jwks_min_refetch_seconds < 0:
            raise ValueError("[auth.oidc]: need leeway_seconds >= 0, jwks_cache_seconds >= 1, "
                             "jwks_min_refetch_seconds >= 0")

    @classmethod
    def from_toml(cls, table: Mapping[str, Any]) -> OidcSettings:
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(table) - set(known))
        if unknown:
            raise ValueError(f"[auth.oidc]: unknown keys {unknown}; known keys are {sorted(known)}")
        missing = sorted(k for k in ("issuer", "audience") if k not in table)
        if missing:
            raise ValueError(f"[auth.oidc]: missing required keys {missing}")
        values: dict[str, Any] = {"jwks_url": None, "jwks_file": None}
        for name, value in table.items():
            if name == "algorithms":
                if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
                    raise ValueError("[auth.oidc]: algorithms must be a list of strings")
                value = tuple(value)
            elif name.endswith("_seconds"):
                if type(value) is not int:  # bool is an int subclass; `true` is not a duration
                    raise ValueError(f"[auth.oidc]: {name} must be an integer")
            elif not isinstance(value, str):
                raise ValueError(f"[auth.oidc]: {name} must be a string")
            if name == "groups_claim" and value == "":
                value = None  # TOML has no null
            values[name] = value
        return cls(**values)


@dataclass(frozen=True)
class VerifiedIdentity:
    subject: str
    member_type: Literal["human", "agent"]
    groups: tuple[str, ...]
    issuer: str
    expires_at: int


class InvalidToken(Exception):
    """The bearer token is refused (401). `reason` is one of: malformed, unsigned, bad_algorithm,
    bad_signature, unknown_key, expired, not_yet_valid, bad_audience, bad_issuer, missing_claim,
    bad_claim. Neither the message nor `detail` ever carries the token."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"invalid bearer token: {reason}" + (f" ({detail})" if detail else ""))
        self.reason = reason
        self.detail = detail


class OidcUnavailable(Exception):
    """The JWKS cannot be had and no earlier copy is held: the gateway answers 503, not 401.

    Why not 401: the token may be perfectly good; 401 tells a client to throw its credentials away and
    sign in again (against an IdP that is probably down too), and hides an outage in the auth-failure
    numbers. Either way nothing is let in."""


@dataclass(frozen=True)
class _Keys:
    by_kid: dict[tuple[str, str], jwk.Key]  # (kid, kty): an IdP may reuse one kid across key types
    all: tuple[jwk.Key, ...]


class OidcVerifier:
    def __init__(self, settings: OidcSettings, client: httpx.AsyncClient, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._settings = settings
        self._client = client
        self._clock = clock  # monotonic, for the cache and the refetch limit; token times use wall time
        self._cache: TTLCache[str, _Keys] = TTLCache(maxsize=1, ttl=settings.jwks_cache_seconds, timer=clock)
        self._last_good: _Keys | None = None  # served when a scheduled refresh fails (stale-if-error)
        self._last_fetch = -float("inf")
        self._lock = asyncio.Lock()  # one fetch in flight; concurrent requests wait for its result
        # Header checking is not strict: IdPs add their own header parameters; `crit` is still honoured.
        self._registry = JWSRegistry(algorithms=list(settings.algorithms), strict_check_header=False)
        self._claims = jwt.JWTClaimsRegistry(
            leeway=settings.leeway_seconds,
            iss={"essential": True, "value": settings.issuer},
            aud={"essential": True, "value": settings.audience},  # a string, or a list that contains it
            exp={"essential": True},
        )

    @staticmethod
    def looks_like_jwt(token: str) -> bool:
        """Three base64url segments (the last may be empty, so `alg: none` is routed here and refused)."""
        return not token.startswith("mf_") and _JWT_SHAPE.fullmatch(token) is not None

    async def verify(self, token: str) -> VerifiedIdentity:
        if len(token) > _MAX_TOKEN_CHARS or not self.looks_like_jwt(token):
            raise InvalidToken("malformed")
        header = _json_segment(token.split(".", 1)[0])
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or not (kid is None or isinstance(kid, str)):
            raise InvalidToken("malformed", "alg/kid")
        # Decided from the header before any key is looked at: no "none", no HMAC-with-the-public-key.
        if alg.lower() == "none" or token.endswith("."):
            raise InvalidToken("unsigned")
        if alg not in self._settings.algorithms:
            # Name the algorithm for the log only when it is a known name, never arbitrary header text.
            raise InvalidToken("bad_algorithm", alg if alg in JWSRegistry.algorithms else "")
        key = await self._key_for(kid, alg)
        try:
            claims = jwt.decode(token, key, registry=self._registry).claims
        except (errors.BadSignatureError, errors.KeyParameterError, errors.InvalidKeyCurveError) as err:
            raise InvalidToken("bad_signature", err.error) from None  # wrong key, or a key of the wrong kind
        except (errors.JoseError, ValueError) as err:
            raise InvalidToken("malformed", getattr(err, "error", "")) from None
        try:
            self._claims.validate(claims)
        except errors.ClaimError as err:
            raise InvalidToken(_claim_reason(err), err.claim) from None
        return self._identity(claims)

    def _identity(self, claims: dict[str, Any]) -> VerifiedIdentity:
        s = self._settings
        subject = claims.get(s.member_claim)
        if subject is None or subject == "":
            raise InvalidToken("missing_claim", s.member_claim)
        if not isinstance(subject, str):
            raise InvalidToken("bad_claim", s.member_claim)
        kind = claims.get(s.type_claim) if s.type_claim else None
        # An unknown value is refused rather than guessed: it would be stamped on every record written.
        if kind not in (None, "human", "agent"):
            raise InvalidToken("bad_claim", s.type_claim or "")
        member_type: Literal["human", "agent"] = "agent" if kind == "agent" else "human"
        groups = claims.get(s.groups_claim) if s.groups_claim else None
        groups = [] if groups is None else [groups] if isinstance(groups, str) else groups
        if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
            raise InvalidToken("bad_claim", s.groups_claim or "")
        return VerifiedIdentity(subject=subject, member_type=member_type, groups=tuple(dict.fromkeys(groups)),
                                issuer=claims["iss"], expires_at=int(claims["exp"]))

    async def _key_for(self, kid: str | None, alg: str) -> jwk.Key:
        key = _pick(await self._current(), kid, alg)
        if key is None:
            # Rotation: the IdP may have published a key we have not seen yet. Refetch, but rate limited,
            # so a flood of made-up kids costs the IdP one request per interval, not one per token.
            keys = await self._fetch(forced=True)
            key = _pick(keys, kid, alg) if keys else None
        if key is None:
            raise InvalidToken("unknown_key")
        return key

    async def _current(self) -> _Keys:
        keys = self._cache.get("jwks") or await self._fetch(forced=False)
        if keys is None:
            raise OidcUnavailable("JWKS unavailable")
        return keys

    async def _fetch(self, *, forced: bool) -> _Keys | None:
        async with self._lock:
            cached = self._cache.get("jwks")
            if cached is not None and not forced:
                return cached  # another request refreshed it while this one waited
            if self._clock() - self._last_fetch < self._settings.jwks_min_refetch_seconds:
                return cached or self._last_good  # fetched (or failed) a moment ago: do not ask again yet
            self._last_fetch = self._clock()
            try:
                keys = await self._load()
            except (httpx.HTTPError, OSError, ValueError):
                # A forced refetch that fails leaves the held set in place: the token's kid is still
                # unknown (401), and junk kids cannot turn an IdP blip into 503s for everyone.
                return cached or self._last_good
            self._cache["jwks"] = self._last_good = keys
            return keys

    async def _load(self) -> _Keys:
        s = self._settings
        if s.jwks_url is not None:
            response = await self._client.get(s.jwks_url, headers={"Accept": "application/json"})
            response.raise_for_status()
            document = response.json()
        else:
            document = json.loads(await asyncio.to_thread(Path(str(s.jwks_file)).read_bytes))
        entries = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(entries, list):
            raise ValueError("JWKS without a keys list")
        keys: list[jwk.Key] = []
        for entry in entries:
            # Signing keys only; one key we cannot read (a new kty, a typo) must not hide the others.
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" or entry.get("kty") == "oct":
                continue
            try:
                keys.append(jwk.import_key(entry))
            except (errors.JoseError, ValueError, TypeError):
                continue
        if not keys:
            raise ValueError("JWKS without usable signing keys")
        return _Keys(by_kid={(k.kid, k.key_type): k for k in keys if k.kid}, all=tuple(keys))


def _pick(keys: _Keys, kid: str | None, alg: str) -> jwk.Key | None:
    kty = JWSRegistry.algorithms[alg].key_type
    if kid is not None:
        return keys.by_kid.get((kid, kty))
    # No kid: only unambiguous when the set holds exactly one key of the algorithm's type.
    candidates = [k for k in keys.all if k.key_type == kty]
    return candidates[0] if len(candidates) == 1 else None


def _json_segment(segment: str) -> dict[str, Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (binascii.Error, ValueError, RecursionError):
        raise InvalidToken("malformed", "header") from None
    if not isinstance(value, dict):
        raise InvalidToken("malformed", "header")
    return value


def _claim_reason(err: errors.ClaimError) -> str:
    if isinstance(err, errors.ExpiredTokenError):
        return "expired"
    if isinstance(err, errors.MissingClaimError):
        return "missing_claim"
    return {"nbf": "not_yet_valid", "iat": "not_yet_valid", "iss": "bad_issuer", "aud": "bad_audience"}.get(
        err.claim, "bad_claim")
