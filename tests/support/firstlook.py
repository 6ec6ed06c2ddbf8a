"""The processes the first-look tests drive: the demo as a user starts it, and a
monitor on a machine with only Claude Code's own login (no accounts file)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional

from .home import REPO, clean_env
from .hooks import hooked
from .monitor import start_monitor
from .provider import ProviderServer
from .waiting import wait_until

DASHBOARD_RE = re.compile(r"dashboard at (http://127\.0\.0\.1:\d+)/")


def login_usage(five: float = 37.5, seven: float = 62.0) -> Dict[str, Any]:
    """A usage reply whose windows reset in 2 h 10 min and 3 days from now."""
    import time
    now = time.time()
    return {"five_hour": {"utilization": five, "resets_at": int(now + 7800)},
            "seven_day": {"utilization": seven, "resets_at": int(now + 3 * 86400)}}


def get_json(url: str, timeout: float = 10.0) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as resp:
        return json.loads(resp.read())


class Demo:
    """`python3 -m svcposture monitor demo ARGS` in its own process group; `.url`, `.lines`."""

    def __init__(self, home: Path, args: List[str], env: Optional[Dict[str, str]] = None) -> None:
        """`env`: variables added to the demo's clean environment (SVC_VENDORS, say)."""
        home.mkdir(mode=0o700, exist_ok=True)  # every command refuses a HOME that does not exist
        env = dict(clean_env(home), **(env or {}))
        self.proc = subprocess.Popen([sys.executable, "-m", "svcposture", "monitor", "demo"] + args, cwd=str(REPO),
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.lines: List[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = ""

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_ready(self, timeout: float = 60.0) -> "Demo":
        def ready() -> Optional[str]:
            if self.proc.poll() is not None:
                raise AssertionError("the demo exited %s:\n%s" % (self.proc.returncode, self.text()))
            found = DASHBOARD_RE.search(self.text())
            return found.group(1) if found else None
        self.url = wait_until(ready, timeout=timeout, message="the demo's dashboard line")
        wait_until(lambda: get_json(self.url + "/api/accounts").get("available") is True, timeout=timeout,
                   message="the demo's first probe")
        return self

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        return self.proc.returncode


def login_only_node(home: Path, provider: ProviderServer, token: str, plan: str = "max") -> Dict[str, str]:
    """The environment of a machine with Claude Code's login and no accounts file."""
    creds = home / ".claude" / ".credentials.json"
    creds.parent.mkdir(parents=True, exist_ok=True)
    creds.write_text(json.dumps({"claudeAiOauth": {"accessToken": token, "subscriptionType": plan}}))
    os.chmod(str(creds), 0o600)
    provider.set_usage(token, login_usage())
    env = clean_env(home)
    env["SVC_PROVIDER_URL"] = provider.url
    return hooked(env, quota_poll_s=1)


def start_login_monitor(env: Dict[str, str]) -> Any:
    mon = start_monitor(env)
    wait_until(lambda: get_json(mon.url + "/api/login").get("available") is True, timeout=30,
               message="the login's first sample on /api/login")
    return mon
