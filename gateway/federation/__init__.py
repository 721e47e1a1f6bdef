"""Providers and one question asked of many: handles (timeouts, breakers), plans, fan-out, record counts.

`breaker` keeps each provider's health and admission (who may call, how many at once); `providers`
opens the configured providers, each behind a `ProviderHandle`; `plans` keeps recall plans per tree
version; `fanout` asks every provider of a plan at once and merges the answers; `counts` keeps the record
counts shown on memory objects; `failures` is the one map from what a provider call raised to the API's
error, for every route and the migration.
"""

from gateway.federation.breaker import Breaker, CircuitOpen, Gate
from gateway.federation.counts import RecordCounts
from gateway.federation.failures import failure_for, provider_failure
from gateway.federation.fanout import FederatedAnswer, FederatedHit, recall
from gateway.federation.plans import KeptPlan, RecallPlans
from gateway.federation.providers import Missed, ProviderHandle, Providers

__all__ = ["Breaker", "CircuitOpen", "FederatedAnswer", "FederatedHit", "Gate", "KeptPlan", "Missed",
           "ProviderHandle", "Providers", "RecallPlans", "RecordCounts", "failure_for", "provider_failure", "recall"]
