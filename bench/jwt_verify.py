"""Token verification with a cached JWKS: time per `OidcVerifier.verify` call.

Signs one token per algorithm with a key generated here, warms the JWKS cache (read from a temporary
jwks_file, so no network is involved), then verifies the same token N times and prints p50/p99/max in
microseconds. Figures only.

    .venv/bin/python bench/jwt_verify.py [N]
"""

from __future__ import annotations

import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from joserfc import jwk, jwt

from gateway.identity.oidc import OidcSettings, OidcVerifier

ISSUER = "https://idp.example.test"
AUDIENCE = "memfed"
WARMUP = 500


def percentile(sorted_ns: list[int], p: float) -> float:
    index = min(len(sorted_ns) - 1, round(p / 100 * (len(sorted_ns) - 1)))
    return sorted_ns[index] / 1000


async def measure(alg: str, key: jwk.Key, n: int, directory: Path) -> list[int]:
    path = directory / f"{alg}.json"
    path.write_text(json.dumps({"keys": [key.as_dict(private=False)]}))
    settings = OidcSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=None, jwks_file=str(path),
                            type_claim="memfed_type", algorithms=(alg,))
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "ana", "iat": now, "exp": now + 3600,
              "memfed_type": "agent", "groups": ["eng", "ops", "support"]}
    token = jwt.encode({"alg": alg, "kid": key.kid}, claims, key, algorithms=[alg])
    async with httpx.AsyncClient() as client:
        verifier = OidcVerifier(settings, client)
        for _ in range(WARMUP):  # fills the JWKS cache and warms the interpreter
            await verifier.verify(token)
        samples = []
        for _ in range(n):
            start = time.perf_counter_ns()
            await verifier.verify(token)
            samples.append(time.perf_counter_ns() - start)
    return sorted(samples)


async def main(n: int) -> None:
    keys: list[tuple[str, jwk.Key]] = [
        ("RS256", jwk.RSAKey.import_key(rsa.generate_private_key(public_exponent=65537, key_size=2048),
                                        {"kid": "rsa"})),
        ("ES256", jwk.ECKey.import_key(ec.generate_private_key(ec.SECP256R1()), {"kid": "ec"})),
    ]
    print(f"jwt verify, cached JWKS, N={n} per row, python {platform.python_version()}, {platform.machine()}")
    print(f"{'alg':<8}{'p50 us':>10}{'p99 us':>10}{'max us':>10}{'mean us':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for alg, key in keys:
            s = await measure(alg, key, n, Path(tmp))
            mean = statistics.fmean(s) / 1000
            print(f"{alg:<8}{percentile(s, 50):>10.1f}{percentile(s, 99):>10.1f}{s[-1] / 1000:>10.1f}"
                  f"{mean:>10.1f}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000))
