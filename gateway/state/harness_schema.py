"""The agent's side of the gateway's own tables: harnesses, what priming placed, the observe outbox, jobs.

On the same `metadata` as gateway/state/schema.py and listed in gateway/state/tables.py, which is what
`StateStore.open` creates.

A harness stores only its two settings (§9). What its agent may use is read off the grants every
time and never copied here: a second list would drift from the grants and widen or narrow access.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, String, Table, Text

from gateway.state.schema import metadata

harnesses = Table(
    "harnesses",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(300), nullable=False),
    Column("agent_member_id", String(64), nullable=False, index=True),
    Column("default_memory_id", String(64), nullable=True),
    Column("observe", Boolean, nullable=False, default=True),
    Column("created_by", String(64), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)

# What one prime placed, per memory, in tokens (§9.1: "the cost is visible even where it is not set
# by the client"). `harness_id` is null for a prime read at a memory's own route.
prime_log = Table(
    "prime_log",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("request_id", String(100), nullable=False),
    Column("harness_id", String(64), nullable=True, index=True),
    Column("memory_id", String(64), nullable=False, index=True),
    Column("principal", String(200), nullable=False),
    Column("tokens", Integer, nullable=False),
    Column("records", Integer, nullable=False),
    Column("budget", Integer, nullable=False),
    Column("tokenizer", String(32), nullable=False),
    Column("at", BigInteger, nullable=False),
)

# One row per episode to deliver. Written (and committed) before the provider is called, so an episode
# survives a provider outage and a restart; `status` moves pending -> delivered | failed.
# `lease_until` is a claim: a sender sets it before calling the provider so that no other sender (the
# background worker, another process) sends the same row meanwhile.
observe_outbox = Table(
    "observe_outbox",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("job_id", String(64), nullable=False, index=True),
    Column("seq", Integer, nullable=False),
    Column("memory_id", String(64), nullable=False),
    Column("provider", String(100), nullable=False),
    Column("payload", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", BigInteger, nullable=False),
    Column("lease_until", BigInteger, nullable=False, default=0),
    Column("last_error", Text, nullable=False, default=""),
    Column("record_id", String(200), nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("delivered_at", BigInteger, nullable=True),
)

Index("ix_observe_outbox_due", observe_outbox.c.status, observe_outbox.c.next_attempt_at)

# What an `observe` that answered 202 has written since (§5.1).
observe_jobs = Table(
    "observe_jobs",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("memory_id", String(64), nullable=False, index=True),
    Column("status", String(16), nullable=False),
    Column("record_ids", Text, nullable=False, default="[]"),
    Column("episodes", Integer, nullable=False),
    Column("error", Text, nullable=False, default=""),
    Column("created_by", String(200), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)
