"""The HTTP side of a node, one job per module (docs/architecture.md).

Layers, each importing only the ones below it:

- server: MonitorServer, the sockets (bind, accept, descriptor pressure, the
  connection cap, hand-off to a thread, stream slots).
- fastlane: cached plain reads answered from one selector thread with the
  app's cached Responses; handler: reading a request and its one-write reply;
  requesthead: the one parser of request heads both use; connection: a client
  socket and what the fast lane left on it. protocols: the typed seams (what
  the server gives the lane and the handlers, and what they ask of the app).
- app: MonitorApp, the route table and its endpoints, the guard's decisions
  and the cached reads; routes: Route(method, path, endpoint), 404 and 405.
  Adding a route is one Route line in app.ROUTES and one endpoint method
  returning a Response (docs/architecture.md).
- node: a node's services (posture, trajectory, sampler, cloud env, liveness)
  built, started and stopped for `svc-monitor` and the library's start_server.
- main: the `svc-monitor` process (lock, logging, signals, run_monitor), and
  demo_main, which runs svcposture.demo on it.
- sse: the one stream pump and its slots; streams: the posture and trajectory
  stream sources. fleet: the /api/fleet cache. trust: the Host/Origin policy.
- exposition: the /metrics text; openapi: the OpenAPI document's builder over
  openapi_paths (every route) and openapi_schemas (every component), pure
  functions; vendor_routes picks the posture `?provider=` names (docs/codex.md).
- assets: the dashboard files in static/.
- request: Request and the limits a request is read under; response:
  Response, and Response.encode, the one place a reply gets its Connection
  line and loses its body for HEAD.
- memo: Memo, the one bytes cache; singleflight: SingleFlight, the one
  single-flight read.

The terminal clients (hud, statusline, line) live in svcposture.term, node
set-up (`svc-monitor init`) in svcposture.firstrun; cli.MONITOR_COMMANDS says
which module runs each `svc-monitor` subcommand.
"""
