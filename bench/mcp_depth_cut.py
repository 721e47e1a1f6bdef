"""What the MCP tools' depth cut (gateway/agent/mcp/depth.py) costs on an ordinary answer, side by side with
the work every tool answer already gets: parsing the API's JSON and marking its records untrusted.

Prints, for a page of R records (p50 over N runs, milliseconds): json.loads of the page, the trust
marking, the cut on the page as it is (within the bound: probed, handed on uncopied) and on the same
page with one record nested 300 levels deep (copied and cut), and the ratios to json.loads. Figures
only; nothing is asserted.

    .venv/bin/python bench/mcp_depth_cut.py [N] [R]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from gateway.agent.mcp.depth import cut
from gateway.agent.mcp.results import mark_untrusted


def record(index: int) -> dict[str, Any]:
    return {"id": f"hrec_{index:032x}", "object": "memory.record", "memory_id": "hmem_" + "b" * 32,
            "type": "note", "title": "Acme renewal", "content": [{"type": "text", "text": "Acme renews. " * 30}],
            "attributes": {"account": "acme", "standing": True, "tags": ["renewal", "q1"]}, "version": 1,
            "status": "active", "supersedes": None,
            "time": {"valid_from": None, "valid_to": None, "written_at": "2026-10-01T00:00:00.000Z",
                     "invalidated_at": None},
            "written_by": {"kind": "member", "id": "mbr_1", "type": "agent"}, "references": [], "trust": "untrusted"}


def p50(runs: int, work: Callable[[], Any]) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def main(runs: int, size: int) -> None:
    page = {"object": "list", "data": [record(i) for i in range(size)], "next": None}
    raw = json.dumps(page).encode()
    deep: Any = "bottom"
    for _ in range(300):
        deep = {"a": deep}
    deep_page = {**page, "data": [*page["data"][:-1], {**record(size), "attributes": {"tree": deep}}]}
    parse = p50(runs, lambda: json.loads(raw))
    mark = p50(runs, lambda: mark_untrusted(page))
    shallow = p50(runs, lambda: cut(page))
    cut_deep = p50(runs, lambda: cut(deep_page))
    print(f"page of {size} records, p50 of {runs} runs")
    print(f"  json.loads          {parse:7.2f} ms")
    print(f"  mark_untrusted      {mark:7.2f} ms   ({mark / parse:.2f}x json.loads)")
    print(f"  cut, within bound   {shallow:7.2f} ms   ({shallow / parse:.2f}x json.loads)")
    print(f"  cut, one deep rec.  {cut_deep:7.2f} ms   ({cut_deep / parse:.2f}x json.loads)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200, int(sys.argv[2]) if len(sys.argv) > 2 else 200)
