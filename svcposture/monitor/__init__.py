"""The HTTP side of a node, one job per module.

- main: the `svc-monitor` process (lock, logging, signals, run_monitor) and
  the library's start_server(home).
- server: MonitorServer, its shared caches and stream bookkeeping.
- handler: request parsing, the routes, the guard's use, one-write replies.
- trust: the Host/Origin trust policy behind the guard.
- fastlane: cached plain reads of /api/accounts from one selector thread.
- sse: the /api/accounts/stream event stream.
- exposition: the /metrics text and the OpenAPI document (pure functions).
- assets: the dashboard files in static/.
- wire: limits, reasons and header bytes the handler and fast lane share.
- demo: `svc-monitor demo`.

The terminal clients (hud, statusline, line) live in svcposture.term, node
set-up (`svc-monitor init`) in svcposture.nodeinit.
"""
