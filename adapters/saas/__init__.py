"""The SaaS memory API: a hosted store of records with kinds, tiers, importance and supersession.

`provider` is the adapter (who a memory and a record are at the vendor, and writes); `_reads` its reads
and recall; `_ingest` episodes through the vendor's ingest jobs; `_records` how a memfed record travels in
the vendor's fields; `wire` every path, field name and error code of the vendor's HTTP API.
"""

from adapters.base import AdapterFactory
from adapters.saas.provider import SaasProvider

factory: AdapterFactory = SaasProvider.from_config

__all__ = ["SaasProvider", "factory"]
