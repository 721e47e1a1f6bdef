"""The words every room of the gateway speaks, and nothing else: the API error envelope and its factories
(errors), the JSON answer (answers), ids (ids), the one clock (clock), the configuration file (config) and
the bounds on what a request may carry (limits). Nothing here imports another room of the gateway, so any
room may import it."""
