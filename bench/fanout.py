"""Fan-out: one recall from a root over 1,000 memories spread over 3 providers, each a fake vendor on
loopback HTTP that answers every request after L milliseconds.

The vendors speak the mem0 Platform dialect (tests/adapters/fake_mem0.py behind a real HTTP server, each
in a process of its own), which can search many memories in one call. The gateway runs in this process and
reaches them over loopback. Prints
wall time / L (target at most 1.2) and the vendor calls one recall made.

The tree is a root, three branches (one per provider) and the memories below them; with `--flat` the
memories are the root's own children, spread over the three providers, so the answer names 1,000
children whose counts it must not wait for (they are counted after the answer).

    .venv/bin/python bench/fanout.py --memories 1000 --latency-ms 50 --repeat 20
    .venv/bin/python bench/fanout.py --flat --memories 1000 --latency-ms 50 --repeat 20
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import http.client
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.api._gateway import make_config, running_gateway
from tests.e2e._process import free_port

KEY = "bench-vendor-key"


class LoopbackVendors:
    """Fake vendors served by bench/_vendor_server.py, each in a process of its own (as three vendors
    would be: one vendor's own work does not wait behind another's)."""

    def __init__(self, count: int, zep: bool = False) -> None:
        self.ports = [free_port() for _ in range(count)]
        self.zep = zep  # the last vendor is a Zep fake (v4)
        self.urls = [f"http://127.0.0.1:{p}" for p in self.ports]
        # One client for the bench's own control calls: a new client per call leaves SSL contexts and
        # pools behind, whose collection would then land inside the next timed recall.
        self.control = httpx.Client(timeout=5.0)
        script = Path(__file__).resolve().parent / "_vendor_server.py"
        served = [-p if zep and i == count - 1 else p for i, p in enumerate(self.ports)]
        self.processes = [subprocess.Popen([sys.executable, str(script), str(port)], stdout=subprocess.PIPE)
                          for port in served]
        for url in self.urls:
            for _ in range(200):
                try:
                    self.control.get(url + "/__calls", timeout=0.5)
                    break
                except httpx.HTTPError:
                    time.sleep(0.05)

    def set_latency(self, ms: float) -> None:
        for url in self.urls:
            self.control.post(url + "/__latency", params={"ms": ms})

    def calls_by_vendor(self) -> list[int]:
        return [len(self.control.get(url + "/__calls").json()) for url in self.urls]

    def calls(self, reset: bool = False) -> list[dict[str, Any]]:
        got = [c for url in self.urls for c in self.control.get(url + "/__calls").json()]
        if reset:
            for url in self.urls:
                self.control.delete(url + "/__calls")
        return got

    def stop(self) -> None:
        self.control.close()
        for process in self.processes:
            process.terminate()
            process.wait()


FILLER = 9
FILTERED = {"filters": [{"field": "type", "op": "in", "value": ["note"]},
                        {"field": "attributes.account", "op": "eq", "value": "acme"}], "limit": 20}


async def main(args: argparse.Namespace) -> None:
    import os

    os.environ["BENCH_VENDOR_KEY"] = KEY
    vendors = LoopbackVendors(3, zep=args.zep)
    providers = {f"vendor{i}": {"adapter": "mem0", "variant": "platform", "base_url": url,
                                "api_key_env": "BENCH_VENDOR_KEY", "timeout": 5.0, "concurrency": 16}
                 for i, url in enumerate(vendors.urls)}
    if args.zep:  # a third of the memories on Zep, which searches one graph per call
        providers["vendor2"] = {"adapter": "zep", "base_url": vendors.urls[2], "api_key_env": "BENCH_VENDOR_KEY",
                                "timeout": 30.0, "concurrency": 16, "calls_at_once": args.zep_calls}
        if args.zep_filter_attributes:
            providers["vendor2"]["filter_attributes"] = args.zep_filter_attributes.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        config = make_config(Path(tmp), providers=providers, recall={"cap": args.memories + 10},
                             audit={"enabled": args.audit == "on"})
        async with running_gateway(config, http_client=httpx.AsyncClient(trust_env=False)) as gw:
            root = await gw.root("Root")
            branches = [] if args.flat else [await gw.child(gw.admin, root["id"], f"branch{i}", provider=f"vendor{i}")
                                             for i in range(3)]
            for n in range(args.memories):
                if args.flat:
                    made = await gw.child(gw.admin, root["id"], f"m{n}", provider=f"vendor{n % 3}")
                else:
                    made = await gw.child(gw.admin, branches[n % 3]["id"], f"m{n}")
                if n % 10 == 0:
                    await gw.admin.post(f"/v1/memories/{made['id']}/records", json={
                        "content": f"needle {n}", "attributes": {"account": "acme"}})
                    for other in range(FILLER if args.filters else 0):  # what a filtered recall passes over
                        await gw.admin.post(f"/v1/memories/{made['id']}/records", json={
                            "content": f"filler {n}.{other}", "attributes": {"account": "globex"}})
            latency = args.latency_ms / 1000
            vendors.set_latency(args.latency_ms)
            # The timed recalls go over real loopback HTTP to the gateway's app served by uvicorn in this
            # process: an in-process ASGI client would also wait for work the app does after its answer.
            port = free_port()
            server = uvicorn.Server(uvicorn.Config(gw.app, host="127.0.0.1", port=port, lifespan="off",
                                                   log_level="warning", access_log=False))
            serving = asyncio.create_task(server.serve())
            while not server.started:
                await asyncio.sleep(0.01)
            shape = f"{args.memories} direct children" if args.flat else f"{args.memories + 3} memories below it"
            kinds = "2 mem0 Platform fakes and a Zep v4 fake" if args.zep else "3 mem0 Platform fakes"
            body = recall_body(args)
            asked = ("filters (type note, attributes.account eq acme)" if args.filters else "query") + (
                f" with query {args.query!r}" if args.filters and args.query else "") + (
                f", types {body['types']}" if "types" in body else "")
            print(f"recall by {asked} from the root ({shape}) on 3 loopback vendors ({kinds}), "
                  f"L = {args.latency_ms} ms, {args.repeat} runs each, decision log {args.audit}"
                  + (f", zep filter_attributes {args.zep_filter_attributes or '(none)'}" if args.zep else ""))
            client = RemoteClient(f"http://127.0.0.1:{port}", gw.admin.headers["Authorization"])
            try:
                for counts in ("cold", "old"):
                    await measure(gw, client, vendors, root["id"], counts, latency, args.repeat, body,
                                  args.filters)
            finally:
                client.close()
            server.should_exit = True
            await serving
    vendors.stop()


class RemoteClient:
    """The recalling client, in a process of its own as a real one would be: its work is not the gateway's.
    Each `recall` is one request; the timings come back from the client's own clock (CLOCK_MONOTONIC, one
    clock for every process)."""

    def __init__(self, base_url: str, authorization: str) -> None:
        self._conn, child = multiprocessing.Pipe()
        self._process = multiprocessing.get_context("spawn").Process(
            target=_client_process, args=(child, base_url, authorization), daemon=True)
        self._process.start()

    async def recall(self, path: str, body: dict[str, Any]) -> tuple[float, float, int, dict[str, Any]]:
        self._conn.send((path, body))
        # A thread waits on the pipe, so the gateway's event loop in this process keeps serving.
        return await asyncio.get_running_loop().run_in_executor(None, self._conn.recv)  # type: ignore[no-any-return]

    def close(self) -> None:
        self._conn.send(None)
        self._process.join(5)


def _client_process(conn: Any, base_url: str, authorization: str) -> None:
    # The standard library's HTTP client, on one kept-alive connection: a load generator should add as
    # little of its own time to what it measures as it can.
    url = httpx.URL(base_url)
    connection = http.client.HTTPConnection(url.host, url.port, timeout=30)
    headers = {"Authorization": authorization, "Content-Type": "application/json"}
    while (asked := conn.recv()) is not None:
        path, body = asked
        payload = json.dumps(body)
        started = time.monotonic()
        connection.request("POST", path, body=payload, headers=headers)
        answer = connection.getresponse()
        data = answer.read()
        ended = time.monotonic()
        conn.send((started, ended, answer.status, json.loads(data)))
    connection.close()


async def measure(gw: Any, client: RemoteClient, vendors: LoopbackVendors, root_id: str, counts: str,
                  latency: float, repeat: int, asked: dict[str, Any], filters: bool = False) -> None:
    """`cold`: no count of the root's children was ever seen: they are left out of the answer
    (`children:counts_pending`) and counted after it. `old`: counts were seen but have expired, so they
    are shown and asked again after the answer (every recall after a quiet spell). Either way the answer
    waits for the searches alone."""
    walls: list[float] = []
    calls: list[int] = []
    answered: list[int] = []  # graph objects Zep answered before the answer left: the candidates
    asked_before: list[int] = []  # vendor calls the answer waited for
    vendor_busy: list[float] = []
    before: list[float] = []
    after: list[float] = []
    cpu: list[float] = []
    for _ in range(repeat):
        vendors.calls(reset=True)
        if counts == "cold":
            gw.services.counts.forget_all()
        else:
            gw.services.counts.expire_all()
        gc.collect()  # the bench's own garbage is not the recall's to collect
        # The gateway's CPU on this recall (this process's, while the client waits for its answer): on a
        # machine shared with other work, wall times vary with the load, this much less.
        cpu_before = time.process_time()
        started, ended, status, body = await client.recall(f"/v1/memories/{root_id}/recall", asked)
        cpu.append(time.process_time() - cpu_before)
        await quiet(vendors)  # the counts after the answer finish before the next run
        walls.append(ended - started)
        made_calls = vendors.calls()
        calls.append(len(made_calls))
        per_vendor = vendors.calls_by_vendor()
        # The calls the answer waited for, from the first one's arrival to the last answer: the time
        # spent at the vendors.
        # A filtered recall lists instead of searching: what it waited for is every call made before its answer.
        waited = [c for c in made_calls if c["start"] < ended] if filters else [
            c for c in made_calls if "search" in c["call"]]
        answered.append(sum(c.get("objects", 0) for c in made_calls if c["start"] < ended))
        asked_before.append(len([c for c in made_calls if c["start"] < ended]))
        first_in, last_out = min(c["start"] for c in waited), max(c["end"] for c in waited)
        vendor_busy.append(last_out - first_in)
        before.append(first_in - started)
        after.append(ended - last_out)
        failed = [d for d in body["degraded"] if d.startswith("provider:") and not d.endswith(":emulated")]
        if status != 200 or failed:
            raise SystemExit(f"recall degraded: {status} {body.get('degraded')}")
    searches = sum(1 for c in made_calls if "search" in c["call"])
    gateway = [w - v for w, v in zip(walls, vendor_busy, strict=True)]
    ratios = [w / latency for w in walls]
    print(f"-- counts of the children {counts}: "
          + ("left out, counted after the answer" if counts == "cold" else "shown, asked again after the answer"))
    print(f"wall time      p50 {statistics.median(walls) * 1000:7.1f} ms   max {max(walls) * 1000:7.1f} ms")
    print(f"wall / L       p50 {statistics.median(ratios):7.2f}      max {max(ratios):7.2f}   (target <= 1.2)")
    print(f"at the vendors  p50 {statistics.median(vendor_busy) * 1000:7.1f} ms   "
          f"(first call in to last answer out, L plus the fake's own work)")
    print(f"in the gateway  p50 {statistics.median(gateway) * 1000:7.1f} ms   max {max(gateway) * 1000:7.1f} ms"
          "   (wall minus time at the vendors)")
    print(f"  of which      p50 {statistics.median(before) * 1000:7.1f} ms before the first vendor call, "
          f"{statistics.median(after) * 1000:.1f} ms after the last answer")
    print(f"gateway CPU    p50 {statistics.median(cpu) * 1000:7.1f} ms   max {max(cpu) * 1000:7.1f} ms"
          "   (this process while the recall ran: its whole work on it, overlapped or not)")
    print(f"vendor calls per recall: {statistics.median(calls):.0f} ({searches} searches; the rest count the "
          f"root's children, after the answer); by vendor in the last run: {per_vendor}")
    print(f"before the answer: {statistics.median(asked_before):.0f} vendor calls; Zep answered "
          f"{statistics.median(answered):.0f} graph objects (candidates); degraded: "
          f"{[d for d in body['degraded'] if 'emulated' in d]}")
    pending = "children:counts_pending" in body["degraded"]
    print(f"results in the last answer: {len(body['results'])}; counts pending in it: {pending}")


def recall_body(args: argparse.Namespace) -> dict[str, Any]:
    """The timed recall: by filters (and, with `--query`, words as well) or by the query alone."""
    body: dict[str, Any] = dict(FILTERED, **({"query": args.query} if args.query else {})) if args.filters \
        else {"query": "needle", "limit": 20}
    if args.types:
        body["types"] = args.types.split(",")
    return body


async def quiet(vendors: LoopbackVendors, still: float = 0.15) -> None:
    """Until the vendors have had no new call for `still` seconds."""
    seen = -1
    while (now := len(vendors.calls())) != seen:
        seen = now
        await asyncio.sleep(still)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--flat", action="store_true", help="the memories are the root's own children")
    parser.add_argument("--zep", action="store_true", help="the third vendor is a Zep v4 fake")
    parser.add_argument("--zep-calls", type=int, default=16, help="Zep calls the adapter makes at once")
    parser.add_argument("--filters", action="store_true",
                        help=f"the timed recall is by filters alone; each seeded memory gets {FILLER} more "
                             "records the filter does not match")
    parser.add_argument("--query", default="",
                        help="with --filters: the filtered recall also asks these words (a searched recall)")
    parser.add_argument("--types", default="", help="the recall's `types` (comma-separated)")
    parser.add_argument("--zep-filter-attributes", default="",
                        help="the Zep provider's filter_attributes (comma-separated): empty for none")
    parser.add_argument("--audit", choices=("on", "off"), default="on",
                        help="the decision log records a decision per memory the recall covers or skips")
    try:  # the event loop `memfed serve` runs on (uvicorn picks uvloop where it is installed)
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(parser.parse_args()))
