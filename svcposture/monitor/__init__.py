"""The HTTP side of a node, one job per module (docs/architecture.md).

Layers, each importing only the ones below it:

- server: MonitorServer, the sockets (bind, accept, descriptor pressure, the
  connection cap, hand-off to a thread, stream slots).
- fastlane: cached plain reads answered from one selector thread, with the
  bytes the app gives it; handler: request parsing and one-write replies.
- app: MonitorApp, every route, the guard's decisions and the byte caches.
- node: a node's services (posture, trajectory, sampler, cloud env, liveness)
  built, started and stopped for `svc-monitor` and the library's start_server.
- main: the `svc-monitor` process (lock, logging, signals, run_monitor).
- sse: the one stream pump and its slots; streams: the posture and trajectory
  stream sources. fleet: the /api/fleet cache. trust: the Host/Origin policy.
- exposition: the /metrics text; openapi: the OpenAPI document (pure functions);
  vendor_openapi adds the second vendor to that document, vendor_routes
  picks the posture `?provider=` names (docs/codex.md).
- assets: the dashboard files in static/.
- wire: limits, reasons, the one builder of response heads.
- demo: `svc-monitor demo` dispatches to svcposture.demo.

The terminal clients (hud, statusline, line) live in svcposture.term, node
set-up (`svc-monitor init`) in svcposture.nodeinit.
"""
