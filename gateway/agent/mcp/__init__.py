"""The agent's side of memfed: the ten memory tools of §9.1, served over MCP.

`gateway/agent/mcp/server.py` mounts them in the app; the modules here say which tools a caller is offered
(`offer`), what each accepts (`tools`), how a call becomes a request to memfed's own HTTP API
(`api`, `run`) and how the answer is handed back to the agent as fenced data (`results`).
"""
