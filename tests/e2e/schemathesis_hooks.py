"""Loaded by schemathesis (SCHEMATHESIS_HOOKS) in tests/e2e/test_openapi_fuzz.py: the import's body is
NDJSON, text on the wire, which schemathesis has no serializer of its own for."""

import schemathesis

schemathesis.serializer.alias("application/x-ndjson", "text/plain")
