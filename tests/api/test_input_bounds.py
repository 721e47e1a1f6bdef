"""Input bounds hold before work: bodies are cut off while they stream, deep JSON is refused before parsing."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.base.limits import ATTRIBUTES_MAX_BYTES, ATTRIBUTES_MAX_DEPTH, MAX_JSON_BYTES, MAX_JSON_DEPTH
from gateway.server.app import endpoints
from tests.api._gateway import Gateway, make_config, running_gateway

CHUNK = 64 * 1024


class Counted:
    """A request body of `total` bytes, made as it is pulled; `pulled` says how much the server took."""

    def __init__(self, total: int, head: bytes = b"", tail: bytes = b"") -> None:
        self.total, self.head, self.tail, self.pulled = total, head, tail, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.head:
            self.pulled += len(self.head)
            yield self.head
        left = self.total
        while left > 0:
            piece = b" " * min(CHUNK, left)
            left -= len(piece)
            self.pulled += len(piece)
            yield piece
        if self.tail:
            self.pulled += len(self.tail)
            yield self.tail


async def test_a_chunked_json_body_over_the_limit_is_refused_without_being_read_whole(gateway: Gateway) -> None:
    """A JSON body without Content-Length is counted as it streams: past the limit the read stops and the
    answer is 413 in the envelope, so a 300 MB body never sits in memory whole."""
    root = await gateway.root()
    body = Counted(300 * 1024 * 1024, head=b'{"content": "', tail=b'"}')
    answer = await gateway.admin.post(f"/v1/memories/{root['id']}/records", content=body,
                                      headers={"content-type": "application/json"})
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"]["code"] == "memfed_body_too_large"
    assert body.pulled <= MAX_JSON_BYTES + 2 * CHUNK
    listed = (await gateway.admin.get(f"/v1/memories/{root['id']}/records")).json()
    assert listed["data"] == []


async def test_a_multipart_upload_without_length_stops_at_the_file_limit(tmp_path: Path) -> None:
    """An upload streamed without Content-Length is cut off at the file limit (plus the form's own bytes):
    413 in the envelope, and no more than the limit was taken from the client, so none of it reached disk."""
    limit = 256 * 1024
    async with running_gateway(make_config(tmp_path, files={"max_bytes": limit})) as gateway:
        boundary = "memfedboundary"
        head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n"
                "Content-Type: application/octet-stream\r\n\r\n").encode()
        body = Counted(400 * 1024 * 1024, head=head, tail=f"\r\n--{boundary}--\r\n".encode())
        answer = await gateway.admin.post("/v1/files", content=body,
                                          headers={"content-type": f"multipart/form-data; boundary={boundary}"})
        assert answer.status_code == 413, answer.text
        assert answer.json()["error"]["code"] == "file_too_large"
        assert body.pulled <= limit + 64 * 1024 + 2 * CHUNK
        assert not any((tmp_path / "data" / "files").rglob("*")) if (tmp_path / "data" / "files").exists() else True


async def test_an_upload_within_the_limit_still_streams_in(tmp_path: Path) -> None:
    """The streamed cut-off does not refuse an upload of exactly the limit sent without Content-Length."""
    limit = 256 * 1024
    async with running_gateway(make_config(tmp_path, files={"max_bytes": limit})) as gateway:
        boundary = "memfedboundary"
        head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"ok.bin\"\r\n"
                "Content-Type: application/octet-stream\r\n\r\n").encode()
        body = Counted(limit, head=head, tail=f"\r\n--{boundary}--\r\n".encode())
        answer = await gateway.admin.post("/v1/files", content=body,
                                          headers={"content-type": f"multipart/form-data; boundary={boundary}"})
        assert answer.status_code == 201, answer.text
        assert answer.json()["bytes"] == limit


def _json_routes() -> list[tuple[str, str]]:
    return [(e.method, e.path) for e in endpoints() if e.body is not None]


@pytest.mark.parametrize(("method", "path"), _json_routes())
async def test_json_nested_a_thousand_deep_is_400_on_every_json_route(gateway: Gateway, method: str,
                                                                     path: str) -> None:
    """1,000 levels of nesting, as arrays or objects, are refused with 400 in the envelope on every route
    that reads JSON (never a RecursionError 500), and nothing changes."""
    root = await gateway.root()
    concrete = re.sub(r"{(\w+)}", lambda m: root["id"] if m.group(1) == "memory_id" else f"{m.group(1)}_x",
                      path)
    before = len(list(gateway.services.store.tree.all_ids()))
    for deep in ("[" * 1000 + "]" * 1000, '{"a":' * 1000 + "1" + "}" * 1000,
                 '{"attributes": ' + '{"a":' * 1000 + "1" + "}" * 1000 + "}"):
        answer = await gateway.admin.request(method, concrete, content=deep.encode(),
                                             headers={"content-type": "application/json"})
        assert answer.status_code == 400, (path, answer.status_code, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "memfed_json_too_deep" and error["detail"]["max_depth"] == MAX_JSON_DEPTH
    assert len(list(gateway.services.store.tree.all_ids())) == before


async def test_nesting_up_to_the_depth_limit_is_accepted(gateway: Gateway) -> None:
    """The limit is a limit, not a ban: a body at exactly the allowed depth is read."""
    root = await gateway.root()
    nested: object = 1
    for _ in range(ATTRIBUTES_MAX_DEPTH - 1):
        nested = {"a": nested}
    answer = await gateway.admin.post(f"/v1/memories/{root['id']}/records",
                                      json={"content": "x", "attributes": {"deep": nested}})
    assert answer.status_code == 201, answer.text


async def test_a_deep_json_import_line_is_refused_and_nothing_is_written(gateway: Gateway) -> None:
    """An import line nested 5,000 deep is 422 naming the line, never a 500; no record is written."""
    root = await gateway.root()
    good = {"id": "hrec_a", "versions": [{"type": "note", "content": [{"type": "text", "text": "a"}],
                                          "version": 1, "status": "active",
                                          "time": {"written_at": "2026-01-01T00:00:00Z"},
                                          "written_by": {"kind": "member", "id": "mbr_x"}}]}
    deep = '{"id": "hrec_b", "versions": [' + "[" * 5000 + "]" * 5000 + "]}"
    answer = await gateway.admin.post(f"/v1/memories/{root['id']}/import",
                                      content=(json.dumps(good) + "\n" + deep + "\n").encode())
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["detail"]["line"] == 2
    assert (await gateway.admin.get(f"/v1/memories/{root['id']}/records")).json()["data"] == []


async def test_attributes_have_a_depth_and_size_limit(gateway: Gateway) -> None:
    """Attributes deeper than the attributes limit or larger than their byte limit are 422 on the field."""
    root = await gateway.root()
    nested: object = 1
    for _ in range(ATTRIBUTES_MAX_DEPTH + 1):
        nested = {"a": nested}
    deep = await gateway.admin.post(f"/v1/memories/{root['id']}/records",
                                    json={"content": "x", "attributes": {"deep": nested}})
    assert deep.status_code == 422, deep.text
    assert deep.json()["error"]["param"] == "attributes"
    big = await gateway.admin.post(f"/v1/memories/{root['id']}/records",
                                   json={"content": "x", "attributes": {"k": "v" * ATTRIBUTES_MAX_BYTES}})
    assert big.status_code == 422, big.text
    assert big.json()["error"]["param"] == "attributes"
    observed = await gateway.admin.post(f"/v1/memories/{root['id']}/observe",
                                        json={"content": "x", "attributes": {"deep": nested}})
    assert observed.status_code == 422, observed.text
    assert (await gateway.admin.get(f"/v1/memories/{root['id']}/records")).json()["data"] == []
