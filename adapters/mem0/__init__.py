"""mem0, the hosted Platform API and the self-hosted OSS server.

`provider` is the adapter (who a memory and a record are at mem0, and writes); `_reads` its reads and
recall; `wire` the HTTP calls of both variants; `_records` how a memfed record travels in mem0's
fields (its answers are judged by memfed's shared `adapters.filters`).
"""

from adapters.base import AdapterFactory
from adapters.mem0.provider import Mem0Provider

factory: AdapterFactory = Mem0Provider.from_config

__all__ = ["Mem0Provider", "factory"]
