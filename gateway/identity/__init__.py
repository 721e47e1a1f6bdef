"""Who is asking: a bearer credential (a memfed API key or an OIDC token) becomes a `Principal`.

`auth` resolves the credential on every request; `oidc` verifies tokens against the issuer's keys.
"""

from gateway.identity.auth import Principal, authenticate

__all__ = ["Principal", "authenticate"]
