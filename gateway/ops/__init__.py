"""Running the gateway as a service: readiness and liveness probes, the serve loop with its graceful stop,
and one-line reasons for a start that fails."""

from gateway.ops.health import Readiness, ReadinessGate

__all__ = ["Readiness", "ReadinessGate"]
