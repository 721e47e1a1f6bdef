"""Running the gateway as a service: the serve loop with its graceful stop, and one-line reasons for a start
that fails. (The readiness and liveness probes it drives are routes: gateway/api/health.py.)"""

from gateway.ops.serve import run

__all__ = ["run"]
