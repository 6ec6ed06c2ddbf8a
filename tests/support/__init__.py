"""The test harness, shared by the test suite and the scripts in scripts/.

How it is imported, with no sys.path edits anywhere:

- `tests/` and `tests/support/` are packages, and every import names the full
  path: `from tests.support.monitor import start_monitor`. That only needs the
  repository root on sys.path, which holds in both ways the code runs:
  - pytest: setup.cfg sets `pythonpath = .` (rootdir-relative, pytest >= 7),
    so the root is on sys.path before any conftest or test module is imported,
    under every --import-mode. With tests/ a package, the default (prepend)
    mode imports test modules as `tests.test_x` and also finds the root as
    their base directory;
  - scripts: they run as modules from the root (`python3 -m scripts.bench_server`;
    scripts/ is a package too), and `python -m` puts the working directory first
    on sys.path. bench_all.py runs them that way.
- Node processes started by the harness (monitor, CLI, probe children) do not
  import the harness; they get the checkout's `svcposture` through PYTHONPATH
  set by support.home.clean_env(), or a vendored copy where a test says so.

Modules: waiting (wait_until), home (HOME, env, accounts file, canaries, cluster
repo), cli (the CLI as a child or in-process), provider (the fake provider),
tracker (Linear-compatible GraphQL), loki, monitor (the monitor process, HTTP,
SSE), crash (the kill -9 edge test). Nothing is imported here: a test pulls in
only what it uses.
"""
