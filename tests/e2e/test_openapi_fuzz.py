"""schemathesis against a live `memfed serve` (a real process) on real ids: the server does what its
/openapi.json says, for every operation, with every check schemathesis has.

Seeded ids: a root memory with a child, a record with a text part and a file part (so `content/{index}`
has bytes to answer), a second member with a key, a group, a grant, a harness, a named query and an
observe job. They are fixed as path parameters, so generated requests reach real objects, not only 404s.

Bounded in time: a few examples per operation (`MAX_EXAMPLES`), one worker, no shrinking, and a request
timeout; on a loaded two-core machine the run stays well under three minutes.

Checks that cannot apply here, in one place (every other check runs, on every operation):
- `ignored_auth` runs, but two routes are public by design (`GET /v1/uhp`, `GET /openapi.json`) and
  declare no security, so it has nothing to find on them.
- `use_after_free` and `ensure_resource_availability` need the stateful phase's links between
  operations; the document declares no OpenAPI links, so that phase is not run (`--phases` below) and
  these two checks see only the single requests of the other phases.
- `object_level_authorization` compares two identities' answers; it is given one (the admin), who may
  read everything, so it cannot find a leak. Cross-member isolation is pinned by tests/e2e/test_serve.py
  and tests/api/test_isolation_properties.py instead.
- `positive_data_acceptance` takes 422 as well as its defaults for schema-valid input. A 422 here is a
  rule JSON Schema cannot state: an id that names no member or provider, a cursor this server did not
  give, an Idempotency-Key reused for another request (the key is generated, and repeats), a query
  language the memory's provider does not run, `parent` with `ancestor`, a name already taken. Every
  rule JSON Schema can state is in the schemas (pinned by tests/api/test_openapi.py), so a 400, 413 or
  415 for schema-valid input still fails the run.
- The stateful phase is not run: no OpenAPI links are declared (above).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e._process import ServeProcess

pytestmark = pytest.mark.e2e
ADMIN_KEY = "mf_e2e_admin_key_for_schemathesis_0123456789"
MAX_EXAMPLES = 4
ROOT = Path(__file__).resolve().parents[2]
# What positive_data_acceptance takes as "accepted" for schema-valid input: its own defaults, and 422
# for the rules JSON Schema cannot state (see the module docstring).
ACCEPTED = ("2xx", "3xx", "401", "403", "404", "409", "422", "429", "5xx")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path / "data", admin_key=ADMIN_KEY, ready_seconds=120)
    yield process
    process.stop()


QUERY = {"params": {"type": "object", "properties": {}}, "language": "sql",
         "body": "SELECT type, count(*) AS n FROM records GROUP BY type ORDER BY type"}


def seed(base_url: str) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """Real objects for every path parameter the API has, made through the API itself: the ids every
    operation uses, and for each operation that removes something, ids of its own to remove (so that a
    delete fuzzed early does not leave the others only 404s)."""
    admin = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30.0)

    def made(answer: httpx.Response) -> dict[str, str]:
        assert answer.status_code in (200, 201, 202), answer.text
        body: dict[str, str] = answer.json()
        return body

    root = made(admin.post("/v1/memories", json={"name": "Fuzzed"}))
    doomed = made(admin.post("/v1/memories", json={"name": "Doomed"}))
    made(admin.post("/v1/memories", json={"name": "Below", "parent_id": root["id"]}))
    file_id = made(admin.post("/v1/files", files={"file": ("a.txt", b"seeded bytes", "text/plain")}))["id"]
    record = made(admin.post(f"/v1/memories/{root['id']}/records", json={
        "content": [{"type": "text", "text": "seeded"}, {"type": "file", "file": {"id": file_id}}]}))
    forgotten = made(admin.post(f"/v1/memories/{root['id']}/records", json={"content": "to forget"}))
    member = made(admin.post("/v1/members", json={"name": "other", "type": "agent"}))
    key = made(admin.post(f"/v1/members/{member['id']}/keys"))
    group = made(admin.post("/v1/groups", json={"name": "team"}))
    grant = made(admin.post(f"/v1/memories/{root['id']}/grants",
                            json={"principal": f"member:{member['id']}", "privileges": ["read"]}))
    harness = made(admin.post("/v1/harnesses", json={"name": "fuzz", "agent_member_id": member["id"]}))
    doomed_harness = made(admin.post("/v1/harnesses", json={"name": "doomed", "agent_member_id": member["id"]}))
    made(admin.put(f"/v1/memories/{root['id']}/queries/by_type", json=QUERY))
    made(admin.put(f"/v1/memories/{root['id']}/queries/doomed", json=QUERY))
    ids = {"memory_id": root["id"], "record_id": record["id"], "file_id": file_id, "member_id": member["id"],
           "key_id": key["id"], "group_id": group["id"], "grant_id": grant["id"], "harness_id": harness["id"],
           "name": "by_type"}
    own = {"DELETE /v1/memories/{memory_id}": {"memory_id": doomed["id"]},
           "DELETE /v1/memories/{memory_id}/records/{record_id}": {"record_id": forgotten["id"]},
           "DELETE /v1/harnesses/{harness_id}": {"harness_id": doomed_harness["id"]},
           "DELETE /v1/memories/{memory_id}/queries/{name}": {"name": "doomed"}}
    return ids, own


def _config(ids: dict[str, str], own: dict[str, dict[str, str]]) -> str:
    lines = [f'headers = {{ Authorization = "Bearer {ADMIN_KEY}" }}',
             "[checks.positive_data_acceptance]", f"expected-statuses = {list(ACCEPTED)}", "[parameters]"]
    lines += [f'"path.{name}" = "{value}"' for name, value in ids.items()]
    for operation, values in own.items():
        lines += ["", "[[operations]]", f'include-name = "{operation}"', "[operations.parameters]"]
        lines += [f'"path.{name}" = "{value}"' for name, value in {**ids, **values}.items()]
    return "\n".join(lines) + "\n"


def test_schemathesis_finds_nothing_on_the_live_server(server: ServeProcess, tmp_path: Path) -> None:
    """Every operation of /openapi.json, fuzzed with all checks on against `memfed serve`: zero failures."""
    config = tmp_path / "schemathesis.toml"
    config.write_text(_config(*seed(server.base_url)))
    command = [str(Path(sys.executable).parent / "schemathesis"), "--config-file", str(config), "run",
               f"{server.base_url}/openapi.json", "--checks", "all", "--max-examples", str(MAX_EXAMPLES),
               "--workers", "1", "--no-shrink", "--phases", "examples,coverage,fuzzing", "--seed", "1",
               "--request-timeout", "20", "--suppress-health-check", "all"]
    # Run in the test's own directory: schemathesis keeps a cache where it runs.
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path,
                         env={**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_TELEMETRY": "false",
                              "SCHEMATHESIS_HOOKS": "tests.e2e.schemathesis_hooks", "PYTHONPATH": str(ROOT)})
    (tmp_path / "schemathesis.out").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, run.stdout[-30000:] + run.stderr[-5000:]
