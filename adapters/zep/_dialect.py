"""Zep's two wire dialects, API v4 and v3 (the `variant` option): the same operations, spelled per API."""

from __future__ import annotations

from adapters.zep._v3 import V3
from adapters.zep._v4 import V4

Dialect = V4 | V3
DIALECTS: dict[str, Dialect] = {"v4": V4(), "v3": V3()}
