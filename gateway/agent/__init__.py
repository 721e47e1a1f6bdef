"""The agent's side: what memfed hands to agents and takes from them.

`prime` places standing records in instructions, `fence` quotes member- and vendor-written text as
untrusted data, `outbox` delivers observed episodes durably (`episodes`: an episode and its payload; `background`:
the worker loop that sends them), `mcp` serves the tools of §9.1.
"""
