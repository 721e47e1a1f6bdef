"""Zep, the temporal knowledge graph: API v4 (zep-cloud 4.x) and v3 (zep-cloud 3.x, under /api/v2).

`provider` is the adapter (a memory is a standalone graph; writes, versions, erase); `_reads` and
`_recall` its reads and recall; `_derive` background derivation and Zep's own graph; `_records` how a
record version lives in a graph object; `_v4` and `_v3` the two wires, over `_http` and `_shapes`.
"""

from adapters.base import AdapterFactory
from adapters.zep.provider import ZepProvider

factory: AdapterFactory = ZepProvider.from_config

__all__ = ["ZepProvider", "factory"]
