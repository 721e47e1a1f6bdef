"""The running process: the ASGI application that wires services to routes (app), the serve loop with its
graceful stop (serve), and one-line reasons for a start that fails (failure). The readiness and liveness
probes it drives are routes: gateway/api/health.py."""

from gateway.server.serve import run

__all__ = ["run"]
