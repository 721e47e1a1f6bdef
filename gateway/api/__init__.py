"""The HTTP API of the UHP Memories chapter: one module of routes per resource, and what only routes use.

`_endpoint` turns a route function into a Starlette endpoint (parsing, authentication, the error
envelope); `guard` makes the access checks of a route through `policies.access` and audits each decision;
`idempotency` replays a repeated `Idempotency-Key`; `_writes` carries a write through its outcome;
`models`, `query_models`, `agent_models` and `types` are the request and answer models the OpenAPI
document (`openapi`) is generated from; `render` shapes answers.
"""
