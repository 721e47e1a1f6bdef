"""Discovery (`GET /v1/uhp`), the providers' capability documents, and the OpenAPI document."""

from __future__ import annotations

from typing import Any

from gateway import __version__
from gateway.api._endpoint import Call, Endpoint
from gateway.api.responses_admin import DiscoveryOut, ProviderList
from gateway.api.versions import DEFAULT_VERSION, SUPPORTED_VERSIONS


async def discovery(call: Call) -> dict[str, Any]:
    return {
        "object": "uhp.discovery",
        "protocol": "uhp",
        "versions": list(SUPPORTED_VERSIONS),
        "default_version": DEFAULT_VERSION,
        "conformance_class": "core",
        "capabilities": {
            "memories": True,
            "sessions": False,
            "tasks": False,
            "files": True,
            "harnesses": False,
        },
        "implementation": {"name": "memfed", "version": __version__},
    }


async def providers(call: Call) -> dict[str, Any]:
    return {"object": "list", "data": [h.document() for h in call.services.providers.handles.values()],
            "next": None}


async def openapi(call: Call) -> dict[str, Any]:
    return call.services.openapi


ENDPOINTS = [
    Endpoint("GET", "/v1/uhp", discovery, "What this server speaks (no authentication).", "discovery",
             public=True, response=DiscoveryOut, tags=("discovery",)),
    Endpoint("GET", "/v1/memories/providers", providers,
             "Each provider's capability document and breaker state.", "providers.list",
             response=ProviderList, tags=("discovery",)),
    Endpoint("GET", "/openapi.json", openapi, "This document.", "openapi", public=True, tags=("discovery",)),
]
