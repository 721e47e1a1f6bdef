"""End to end: two `memfed serve` processes on one PostgreSQL, the embedded provider on it: a record
written through one is read, revised and recalled through the other."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests._postgres import fresh_schema
from tests.e2e._process import ServeProcess

pytestmark = pytest.mark.postgres

ADMIN_KEY = "mf_e2e_admin_key_for_tests_only_shared_records_01"


def config_file(path: Path, state_schema: str, records_schema: str) -> Path:
    path.write_text(
        "[state]\n"
        'url = "postgresql://postgres@127.0.0.1:5432/test"\n'
        f'schema = "{state_schema}"\n'
        "[providers.shared]\n"
        'adapter = "postgres"\n'
        f'schema = "{records_schema}"\n'
        "[default]\n"
        'provider = "shared"\n'
    )
    return path


async def test_a_record_written_through_one_process_is_served_by_the_other(tmp_path: Path) -> None:
    """A and B, each with its own data directory: A writes, B reads the record and revises it, A's next
    recall finds B's version."""
    async with fresh_schema("e2estate") as (_e1, state_schema), fresh_schema("e2erec") as (_e2, records_schema):
        config = config_file(tmp_path / "memfed.toml", state_schema, records_schema)
        for instance in ("a", "b"):
            (tmp_path / instance).mkdir()
        a = ServeProcess(tmp_path / "a" / "data", admin_key=ADMIN_KEY, config=config)
        b = None
        try:
            b = ServeProcess(tmp_path / "b" / "data", admin_key=ADMIN_KEY, config=config)
            headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
            async with httpx.AsyncClient(base_url=a.base_url, headers=headers, timeout=10) as on_a, \
                    httpx.AsyncClient(base_url=b.base_url, headers=headers, timeout=10) as on_b:
                memory = (await on_a.post("/v1/memories", json={"name": "Accounts"})).json()
                assert memory["provider"] == "shared"
                made = await on_a.post(f"/v1/memories/{memory['id']}/records",
                                       json={"content": "Acme renews in March."})
                assert made.status_code == 201, made.text
                path = f"/v1/memories/{memory['id']}/records/{made.json()['id']}"

                read = await on_b.get(path)
                assert read.status_code == 200, read.text
                assert read.json()["content"][0]["text"] == "Acme renews in March."
                revised = await on_b.patch(path, json={"content": "Acme renews in April."})
                assert revised.status_code == 200, revised.text

                recalled = await on_a.post(f"/v1/memories/{memory['id']}/recall", json={"text": "April"})
                assert recalled.status_code == 200, recalled.text
                hits = recalled.json()["results"]
                assert [(h["record"]["id"], h["record"]["version"]) for h in hits] == [(made.json()["id"], 2)]
        finally:
            if b is not None:
                b.stop()
            a.stop()
