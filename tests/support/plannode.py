"""A real monitor over one key vendor's accounts, each replying with a captured body (docs/vendors.md).

    with plan_node(root, CopilotServer, [("PRO", "copilot-user-business-seat.json", "a@x.example"),
                                         ("GONE", None, None)], active="PRO") as node:
        node.mon.get_json("/api/accounts?provider=copilot")

Each account is a `<PREFIX><NAME>="<key>"` line of the vendor the stand-in server stands for, its key a
fresh canary; the stand-in replies to it with the captured body (its instants moved an hour ahead), or,
with no body, refuses it as the vendor does. No Claude or Codex line is in the file. `run` is a
`svc-monitor` command against the node that must print no key and no traceback.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from svcposture.vendors import vendor_named
from tests.support.fieldsamples import plan_reply_ahead
from tests.support.home import accounts_path, files_text, monitor_env, set_host_name
from tests.support.monitor import start_monitor
from tests.support.waiting import wait_until

# (NAME, captured reply file or None for a refused key, email or None)
Account = Tuple[str, Optional[str], Optional[str]]


class PlanNode(NamedTuple):
    home: Path
    env: Dict[str, str]
    mon: Any
    server: Any
    keys: Dict[str, str]
    provider: str

    def posture(self) -> Dict[str, Any]:
        """The vendor's posture body (`/api/accounts?provider=<vendor>`, answered 200)."""
        status, body = self.mon.get_json("/api/accounts?provider=" + self.provider)
        assert status == 200, body
        return body

    def posture_fits_the_document(self) -> bool:
        """Whether the vendor's posture body holds to its schema in the served OpenAPI document
        (`<display name>Posture`, every account and window whitelisted there)."""
        from tests.monitor.test_metrics_openapi import _validate

        doc = self.mon.get_json("/api/openapi.json")[1]
        name = vendor_named(self.provider).display_name
        _validate(doc, {"$ref": "#/components/schemas/%sPosture" % name}, self.posture())
        return True

    def accounts(self) -> Dict[str, Any]:
        """The vendor's posture body's accounts by label."""
        return {a["label"]: a for a in self.posture().get("accounts") or ()}

    def active(self) -> Optional[str]:
        active = self.posture().get("active")
        return active["label"] if isinstance(active, dict) else None

    def auths_are(self, scheme: str) -> bool:
        """Whether every request the stand-in got carried one of the node's keys in `scheme`, and each
        key was asked for."""
        with self.server.lock:
            auths = set(self.server.auths)
        return auths == {"%s %s" % (scheme, key) for key in self.keys.values()}

    def switch_to(self, label: str) -> Dict[str, Any]:
        """`switch --to label`: its JSON once the monitor shows the label active; the export line is the
        vendor's own and there is one of it."""
        code, out, err = self.run("switch", "--provider", self.provider, "--to", label, "--json")
        assert code == 0, err
        lines = vendor_named(self.provider).lines
        text = accounts_path(self.home).read_text()
        name = label[len(lines.label_prefix):].upper()
        assert text.count("export %s=" % lines.active_var) == 1 and lines.export_line(name) in text
        wait_until(lambda: self.active() == label, 20, message="the monitor to show %s active" % label)
        return json.loads(out)

    def series(self, family: str, **labels: str) -> List[float]:
        """The values of /metrics' `family` series carrying the vendor's `provider` label and `labels`."""
        want = dict(labels, provider=self.provider)
        found = []
        for line in self.mon.get("/metrics")[2].decode().splitlines():
            name, _, rest = line.partition("{")
            if name == family and "}" in rest:
                pairs = dict(re.findall(r'(\w+)="([^"]*)"', rest.split("}")[0]))
                if all(pairs.get(k) == v for k, v in want.items()):
                    found.append(float(rest.rsplit(" ", 1)[1]))
        return found

    def texts_without_keys(self) -> bool:
        """Whether no key appears in any body of the monitor, its output, or a file of the node but the
        accounts env file."""
        bodies = [self.mon.get(path)[2].decode() for path in (
            "/api/accounts?provider=" + self.provider, "/api/advice?provider=" + self.provider, "/metrics",
            "/api/history?hours=1", "/api/trajectory", "/api/accounts", "/api/fleet/accounts")]
        others = files_text(self.home).replace(accounts_path(self.home).read_text(), "")
        return not any(key in text for key in self.keys.values()
                       for text in bodies + [others, self.mon.stderr_text(), self.mon.stdout_text()])

    def guard(self, account: Optional[str] = None, reserve: Optional[int] = None) -> Tuple[int, Dict[str, Any]]:
        """`guard --provider <vendor> --json` (for `account`, under `reserve`): its exit code and decision."""
        args = ["guard", "--provider", self.provider, "--json"]
        args += ["--account", account] if account else []
        args += ["--reserve", str(reserve)] if reserve is not None else []
        code, out, _err = self.run(*args)
        return code, json.loads(out)

    def best(self) -> str:
        """The account `switch --best --dry-run` would make active."""
        code, out, err = self.run("switch", "--provider", self.provider, "--best", "--dry-run", "--json")
        assert code == 0, err
        return json.loads(out)["to"]

    def run(self, *args: str) -> Tuple[int, str, str]:
        done = subprocess.run([sys.executable, "-m", "svcposture", "monitor", *args], env=self.env,
                              capture_output=True, timeout=60)
        out, err = done.stdout.decode(), done.stderr.decode()
        assert "Traceback" not in err, err
        assert not any(key in out + err for key in self.keys.values())
        return done.returncode, out, err


def _file(lines: Any, accounts: Sequence[Account], keys: Dict[str, str], active: str) -> str:
    rows = ['%s%s="%s"%s' % (lines.entry_prefix, name, keys[name], "  # " + email if email else "")
            for name, _reply, email in accounts]
    return "\n".join(["# key vendor accounts"] + rows + [lines.export_line(active)]) + "\n"


@contextlib.contextmanager
def plan_node(root: Path, server_class: Any, accounts: Sequence[Account], active: str,
              host: str = "plans-node") -> Iterator[PlanNode]:
    """The node, its monitor running and the vendor's posture read once, for a `with` block."""
    provider = server_class.provider
    vendor = vendor_named(provider)
    home = root / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, host)
    keys = {name: "%s-CANARY-%s-%s" % (provider, name.lower(), os.urandom(8).hex()) for name, _r, _e in accounts}
    path = accounts_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_file(vendor.lines, accounts, keys, active))
    os.chmod(str(path), 0o600)
    now = time.time()
    with server_class() as server:
        for name, captured, _email in accounts:
            if captured is not None:
                server.set_reply(keys[name], plan_reply_ahead(captured, now))
        env = monitor_env(home, "http://127.0.0.1:9", SVC_PROBE_INTERVAL_S="1", SVC_POSTURE_TTL_S="1",
                          SVC_GUARD_BUDGET_MS="5000", **{vendor.url.name: server.url})
        mon = start_monitor(env)
        try:
            env["SVC_MONITOR_PORT"] = str(mon.port)
            node = PlanNode(home, env, mon, server, keys, provider)
            wait_until(lambda: len(node.accounts()) == len(accounts) and all(
                a["error"] is not None or a["source"] == "api" for a in node.accounts().values()), 30,
                message="the %s posture" % provider)
            yield node
        finally:
            mon.stop()


def node_fixture(server_class: Any, active: str, **replies: Optional[str]) -> Any:
    """A module-scoped pytest fixture `node`: one plan_node serving every test of the module, an account
    NAME=<captured reply file> (None: a key the stand-in refuses) each, its email `<name>@x.example`."""
    accounts = [(name, reply, name.lower() + "@x.example") for name, reply in replies.items()]
    import pytest

    @pytest.fixture(scope="module")
    def node(tmp_path_factory: Any) -> Iterator[PlanNode]:
        root = tmp_path_factory.mktemp(server_class.provider + "-node")
        with plan_node(root, server_class, accounts, active) as built:
            yield built
    return node


def windows_of(account: Dict[str, Any]) -> Tuple[List[Any], List[Any]]:
    """An account view's windows in short: [(pct, status) of fiveHour, of sevenDay, None where none] and
    [(name, pct, status, windowMinutes) of each extra window]."""
    return ([(w["pct"], w["status"]) if w else None for w in (account["fiveHour"], account["sevenDay"])],
            [(w["name"], w["pct"], w["status"], w.get("windowMinutes")) for w in account["extraWindows"]])


def events_of(home: Path) -> List[str]:
    """Every event line the node appended, as text."""
    return [line for path in sorted((home / "svc" / "events").glob("*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]
