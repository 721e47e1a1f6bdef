"""The decision log: every access decision, journaled before its answer leaves, hash-chained and sealed.

`log` is the log a gateway writes (journal and flusher), `replay` its journal read back, `lines` the journal's
format, `chain` the hashing, `seal` the HMAC over entries and head, `store` the tables, appends and
verification, `query` the reading.
"""

from gateway.audit.lines import REASON_CAP, Coverage, DecisionEntry
from gateway.audit.log import AuditLog
from gateway.audit.query import AuditQuery
from gateway.audit.store import VerifyReport

__all__ = ["REASON_CAP", "AuditLog", "AuditQuery", "Coverage", "DecisionEntry", "VerifyReport"]
