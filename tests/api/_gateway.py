"""A gateway in-process through httpx.ASGITransport, on a fresh data dir with the embedded provider.

Tests import these by name; the fixtures in conftest.py are built from them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from gateway.base.config import Config, from_mapping
from gateway.server.app import bootstrap_admin, create_app, open_services
from gateway.services import Services


@dataclass
class Gateway:
    """An app with its services, an admin client, and a way to make members with their own clients."""

    services: Services
    app: Any
    admin: httpx.AsyncClient
    admin_key: str
    _clients: list[httpx.AsyncClient]

    def client(self, key: str | None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://memfed",
                                   headers=headers)
        self._clients.append(client)
        return client

    async def member(self, name: str, type_: str = "human") -> tuple[str, httpx.AsyncClient]:
        """A new member and a client that acts as it: (member id, client)."""
        made = await self.admin.post("/v1/members", json={"name": name, "type": type_})
        assert made.status_code == 201, made.text
        member_id = made.json()["id"]
        key = await self.admin.post(f"/v1/members/{member_id}/keys")
        return member_id, self.client(key.json()["key"])

    async def root(self, name: str = "Company", **fields: Any) -> dict[str, Any]:
        made = await self.admin.post("/v1/memories", json={"name": name, **fields})
        assert made.status_code == 201, made.text
        return made.json()

    async def child(self, client: httpx.AsyncClient, parent_id: str, name: str, **fields: Any) -> dict[str, Any]:
        made = await client.post("/v1/memories", json={"name": name, "parent_id": parent_id, **fields})
        assert made.status_code == 201, made.text
        return made.json()

    async def grant(self, memory_id: str, principal: str, *privileges: str) -> dict[str, Any]:
        made = await self.admin.post(f"/v1/memories/{memory_id}/grants",
                                     json={"principal": principal, "privileges": list(privileges)})
        assert made.status_code == 201, made.text
        return made.json()


def make_config(tmp_path: Path, **raw: Any) -> Config:
    config = from_mapping(raw)
    return config.with_overrides(data_dir=tmp_path / "data")



class running_gateway:
    def __init__(self, config: Config, http_client: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self.http_client = http_client

    async def __aenter__(self) -> Gateway:
        self.services = await open_services(self.config, http_client=self.http_client)
        key = await bootstrap_admin(self.services.store, announce=False)
        assert key is not None
        app = create_app(self.config, services=self.services)
        self.gw = Gateway(self.services, app, httpx.AsyncClient(), key, [])
        self.gw.admin = self.gw.client(key)
        return self.gw

    async def __aexit__(self, *exc: object) -> None:
        for client in self.gw._clients:
            await client.aclose()
        await self.services.close()
