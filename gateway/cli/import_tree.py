"""`memfed import-tree FILE --url URL --key-env VAR`: send an NDJSON tree to a running gateway.

Unlike `memfed import` (records, on the state directly), this goes through the HTTP route
(POST /v1/imports/tree), so a running gateway and its other instances see the import at once. The file is
streamed, never read whole; standard error shows a bar of the bytes sent (while the gateway checks the
lines) and then one of the rows written. The bars are tqdm's, already the `memfed migrate` bar.
The key is read from the environment variable named by --key-env, never from the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import httpx

from gateway.cli._common import run_async

MEDIA_TYPE = "application/x-ndjson"
CHUNK = 256 * 1024


def add_commands(commands: Any) -> None:
    command = commands.add_parser(
        "import-tree", help="create many memories and grants from an NDJSON file, through a running gateway",
        description="One memory a line ({\"id\"?, \"ref\"?, \"name\", \"parent\"?, \"description\"?, \"restricted\"?, "
        "\"provider\"?}) or grant ({\"grant\": {\"memory\", \"principal\", \"privilege\"}}); a parent is an earlier "
        "line's ref or id, or an existing memory. All of the file is imported, or none of it. Needs an "
        "administrator's key.")
    command.add_argument("file", metavar="FILE", help="the NDJSON file ('-' for standard input)")
    command.add_argument("--url", default="http://127.0.0.1:8080", help="the gateway (http://127.0.0.1:8080)")
    command.add_argument("--key-env", default="MEMFED_API_KEY", metavar="VAR",
                         help="the environment variable holding the API key (MEMFED_API_KEY)")
    command.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    key = os.environ.get(args.key_env)
    if not key:
        print(f"memfed: set {args.key_env} to an administrator's API key", file=sys.stderr)
        return 2
    return run_async(lambda: import_tree(args.file, args.url, key, sys.stderr, sys.stdout))


async def import_tree(file: str, url: str, key: str, err: TextIO, out: TextIO,
                      transport: httpx.AsyncBaseTransport | None = None) -> int:
    """Send the file and follow the answer; 0 once the import is committed, 1 when it was refused."""
    from tqdm import tqdm

    source = sys.stdin.buffer if file == "-" else None
    size = None if source is not None else (await asyncio.to_thread(Path(file).stat)).st_size
    sent = tqdm(total=size, unit="B", unit_scale=True, desc="sending", file=err, leave=True)

    async def chunks() -> AsyncIterator[bytes]:
        # Read in a thread: a slow disk must not hold up the answer's progress lines.
        handle: BinaryIO = source if source is not None else await asyncio.to_thread(open, file, "rb")
        try:
            while chunk := await asyncio.to_thread(handle.read, CHUNK):
                sent.update(len(chunk))
                yield chunk
        finally:
            if handle is not source:
                handle.close()

    written: Any = None
    timeout = httpx.Timeout(30.0, read=600.0)  # the commit of a large import says nothing for a while
    headers = {"Authorization": f"Bearer {key}", "Content-Type": MEDIA_TYPE}
    async with httpx.AsyncClient(base_url=url, transport=transport, timeout=timeout) as client, \
            client.stream("POST", "/v1/imports/tree", content=chunks(), headers=headers) as answer:
        sent.close()
        if answer.status_code != 200:
            await answer.aread()
            return _refused(err, answer.status_code, _json(answer.content))
        last: dict[str, Any] = {}
        async for text in answer.aiter_lines():
            if not text.strip():
                continue
            last = json.loads(text)
            if last.get("phase") == "writing":
                if written is None:
                    written = tqdm(total=last["total"], unit="row", desc="writing", file=err, leave=True)
                written.update(last["done"] - written.n)
    if written is not None:
        written.close()
    if "error" in last or last.get("object") != "memory.tree_import":
        return _refused(err, (last.get("error") or {}).get("detail", {}).get("status", 0), last)
    out.write(json.dumps(last, indent=2) + "\n")
    print(f"memfed: imported {last['memories']} memories and {last['grants']} grants", file=err)
    return 0


def _json(raw: bytes) -> dict[str, Any]:
    try:
        found = json.loads(raw)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _refused(err: TextIO, status: int, envelope: dict[str, Any]) -> int:
    error = envelope.get("error") or {}
    message = error.get("message") or "the gateway answered without a report"
    print(f"memfed: import refused ({status or 'cut short'}): {message}", file=err)
    return 1
