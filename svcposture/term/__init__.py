"""The terminal clients of a node's monitor: what runs in a terminal or an
agent's status line and reads the monitor over HTTP.

- line: the one formatter behind the HUD strip and the status line
- statusline: `svc-monitor statusline`, one render per call
- hud: `svc-monitor hud`, the live terminal strip

Imports nothing: a status line render pays for this package on every call.
"""
