"""The test suite's hooks into the package's processes that a test starts (docs/testing.md).

Nothing in the package reads a test-only variable. A test that needs a
shorter clock or a pause at one step of a switch puts this directory on
PYTHONPATH and sets one of the SVCTEST_* variables below
(`tests.support.hooks.hooked` does both). Python imports `sitecustomize` from
sys.path at start-up, before the command runs, so in each process of that
environment (the command the test starts, and every Python child the package
starts of itself: they keep PYTHONPATH and run without -I, -E or -S) this
module patches the package's attributes:

- SVCTEST_RESET_MARGIN_S: `Settings.from_environ` gives this `reset_margin_s`
  (the probe at a reset waits 60 s past it otherwise);
- SVCTEST_QUOTA_POLL_S: and this `quota_poll_interval_s`, below the 180 s floor;
- SVCTEST_AUTO_SWITCH_GAP_S: `steering.switching.MIN_AUTO_GAP_MS`, in seconds;
- SVCTEST_SWITCH_GATE: a path; a switch that has written its temporary copy of
  the env file waits (up to 30 s) until that path exists before the rename;
- SVCTEST_SWITCH_PAUSE: `STEP:SECONDS`, a switch holds still that long right
  after STEP (`intent`, `rename` or `append`), so a test can kill -9 it there;
- SVCTEST_TOKEN_SWAP: a path; once the bearer token file is open (before any
  check of it), that file is renamed over the token file's path, so a test
  sees what the monitor does when the file is swapped mid-read.

Without a variable set nothing is imported; any other sitecustomize on the
path still runs.
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PAUSE_STEPS = ("intent", "rename", "append")


def _chain() -> None:
    """Run the sitecustomize this one hides, if the interpreter has one further on sys.path."""
    import importlib.machinery
    import importlib.util

    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def _settings_hooks(environ: "dict[str, str]") -> None:
    changes = {}
    if environ.get("SVCTEST_RESET_MARGIN_S"):
        changes["reset_margin_s"] = float(environ["SVCTEST_RESET_MARGIN_S"])
    if environ.get("SVCTEST_QUOTA_POLL_S"):
        changes["quota_poll_interval_s"] = float(environ["SVCTEST_QUOTA_POLL_S"])
    if not changes:
        return
    from svcposture.settings import Settings

    parse = Settings.from_environ.__func__  # type: ignore[attr-defined]

    def from_environ(cls, environ, *, strict=True):  # type: ignore[no-untyped-def]
        return parse(cls, environ, strict=strict).replace(**changes)

    Settings.from_environ = classmethod(from_environ)  # type: ignore[method-assign, assignment]


def _wait_for(path: str) -> None:
    import time

    deadline = time.monotonic() + 30
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)


def _switch_hooks(environ: "dict[str, str]") -> None:
    gap, gate, pause = (environ.get("SVCTEST_AUTO_SWITCH_GAP_S"), environ.get("SVCTEST_SWITCH_GATE"),
                        environ.get("SVCTEST_SWITCH_PAUSE"))
    if not (gap or gate or pause):
        return
    import time

    from svcposture.steering import switching

    if gap:
        switching.MIN_AUTO_GAP_MS = max(0, int(float(gap) * 1000))
    step, _, seconds = (pause or "").partition(":")
    if step and step not in PAUSE_STEPS:
        raise ValueError("SVCTEST_SWITCH_PAUSE: the step is one of %s, not %r" % (", ".join(PAUSE_STEPS), step))

    def hold(at: str) -> None:
        if at == step:
            time.sleep(min(float(seconds or 0), 30.0))

    replace = switching.replace_env_file

    def replace_env_file(*args, **kwargs):  # type: ignore[no-untyped-def]
        hold("intent")  # the intent is written; the temporary copy is next
        if gate:
            kwargs["before_rename"] = lambda: _wait_for(gate)
        done = replace(*args, **kwargs)
        hold("rename")
        return done

    emit = switching._emit
    record = switching._record.__code__

    def _emit(*args, **kwargs):  # type: ignore[no-untyped-def]
        event = emit(*args, **kwargs)
        if sys._getframe(1).f_code is record:  # the switch's own event, not a reconcile's
            hold("append")
        return event

    switching.replace_env_file = replace_env_file
    switching._emit = _emit


def _token_hooks(environ: "dict[str, str]") -> None:
    swap = environ.get("SVCTEST_TOKEN_SWAP")
    if not swap:
        return
    from svcposture.remote import token

    opened = token.open_nofollow

    def open_nofollow(path, flags, *args, **kwargs):  # type: ignore[no-untyped-def]
        fd = opened(path, flags, *args, **kwargs)
        if os.path.exists(swap):
            os.replace(swap, os.fspath(path))  # the path now names another file; the descriptor does not
        return fd

    token.open_nofollow = open_nofollow


_chain()
_settings_hooks(dict(os.environ))
_switch_hooks(dict(os.environ))
_token_hooks(dict(os.environ))
