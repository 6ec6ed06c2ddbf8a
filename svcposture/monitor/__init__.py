"""The HTTP side of a node: server and handler, fast lane, trust policy,
exposition of metrics and OpenAPI, the dashboard's static files, HUD, demo,
and the monitor process's main."""
