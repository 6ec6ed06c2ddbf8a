"""The "acme" vendor: every member of the `Vendor` protocol, built only on the package's public names."""
from __future__ import annotations

import json
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from svcposture.envfile.entries import PLACEHOLDER, PLACEHOLDER_EMAIL, parse_entries, usable
from svcposture.settings import as_base_url, knob_value
from svcposture.summary import binding_window, disabled_body, posture_body
from svcposture.vendor import EnvLines, Knob, SetupHelp

NAME = "acme"
# Its one knob, declared here like a built-in vendor's: the node's Settings read it through the registry.
URL = Knob("SVC_ACME_URL", "http://127.0.0.1:9", "the acme quota endpoint's base URL", as_base_url)
FIVE_HOUR_S, SEVEN_DAY_S = 18000, 604800
KINDS = ("auth", "transport", "timeout", "http", "parse", "internal")
MESSAGES = {
    "auth": "The acme key was refused.",
    "transport": "The acme endpoint could not be reached.",
    "timeout": "The acme endpoint did not answer in time.",
    "http": "The acme endpoint answered with an unexpected HTTP status.",
    "parse": "The acme reply could not be parsed.",
    "internal": "The acme probe failed without a result.",
}
ROW_KEYS = ("label", "email", "active", "fiveHour", "sevenDay", "error", "sampledAt")
# What `svc-monitor init` writes and says about an acme key.
SETUP_HELP = SetupHelp(
    next_step="for an acme key: copy it from the acme console",
    comment=("# To get an acme key: copy it from the acme console.",),
    example=("# acme keys (optional): one line per key, copied from the acme console.",
             "# ACME_KEY_WORK=%s  # %s" % (PLACEHOLDER, PLACEHOLDER_EMAIL),
             '# export ACME_KEY="$ACME_KEY_WORK"'),
    renew="copy a new key for {who} from the acme console into {where}")


def now_ms() -> int:
    return int(time.time() * 1000)


def _iso(epoch_s: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(epoch_s))


def _status(pct: float) -> str:
    return "rejected" if pct >= 100 else "allowed_warning" if pct >= 90 else "allowed"


def _window(raw: Any) -> Optional[Tuple[int, Dict[str, Any]]]:
    if not isinstance(raw, dict):
        return None
    seconds, used, resets = raw.get("seconds"), raw.get("used"), raw.get("resets")
    if not isinstance(seconds, int) or not isinstance(used, (int, float)) or isinstance(used, bool):
        return None
    pct = round(float(used) * 100, 1)
    reset = _iso(resets) if isinstance(resets, int) and 0 < resets < 1e11 else None
    return seconds, {"pct": pct, "resetsAt": reset, "status": _status(pct)}


class AcmeSweep:
    """The child's part for acme: one quota request per usable key."""

    def __init__(self, text: str, environ: Mapping[str, str]) -> None:
        self.environ = environ
        active_key = (environ.get(VENDOR.lines.active_var) or "").strip()
        self.entries: List[Dict[str, Any]] = []
        self.unusable: List[str] = []
        found = parse_entries(text, VENDOR.lines.entry_re())
        for name, email in found:
            value = environ.get(VENDOR.lines.entry_prefix + name)
            if value is None or not usable(value):
                self.unusable.append(VENDOR.lines.label(name))
                continue
            self.entries.append({"label": VENDOR.lines.label(name), "email": email, "key": value.strip(),
                                 "active": bool(active_key) and value.strip() == active_key})
        self.present = bool(found)
        self.secrets = [e["key"] for e in self.entries]
        self.active = next((e["label"] for e in self.entries if e["active"]), None)
        self.futures: List[Any] = []

    def check(self) -> Optional[Dict[str, Any]]:
        if not self.present:
            return None
        return {"usable": [e["label"] for e in self.entries], "unusable": self.unusable, "active": self.active,
                "duplicateActive": []}

    def submit(self, pool: Any, timeout_s: float, secrets: List[str]) -> List[Any]:
        self.futures = [pool.submit(_exchange, e, self.environ, timeout_s) for e in self.entries]
        return self.futures

    def block(self, cut: str = "sweep") -> Optional[Dict[str, Any]]:
        if not self.present:
            return None
        rows = []
        for entry, future in zip(self.entries, self.futures):
            row = {"label": entry["label"], "email": entry["email"], "active": entry["label"] == self.active,
                   "fiveHour": None, "sevenDay": None, "error": None, "sampledAt": None}
            if future.done() and future.exception() is None:
                row.update(future.result())
            else:
                row["error"] = VENDOR.error("timeout" if not future.done() else "internal")
            rows.append(row)
        return {"available": bool(rows), "probedAt": now_ms(), "active": self.active, "accounts": rows}


def _exchange(entry: Mapping[str, Any], environ: Mapping[str, str], timeout_s: float) -> Dict[str, Any]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(knob_value(environ, URL) + "/v1/quota",
                                     headers={"Authorization": "Bearer " + entry["key"]})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            raw = response.read(65536)
    except urllib.error.HTTPError as exc:
        return {"error": VENDOR.error("auth" if exc.code in (401, 403) else "http", http_status=exc.code)}
    except OSError:
        return {"error": VENDOR.error("transport")}
    try:
        placed = VENDOR.parse_reply(json.loads(raw), time.time())
    except ValueError:
        return {"error": VENDOR.error("parse")}
    return dict(placed, sampledAt=now_ms())


class AcmeVendor:
    name = NAME
    display_name = "Acme"
    lines = EnvLines("ACME_KEY_", "ACME_KEY", "acme-", (PLACEHOLDER,))
    error_kinds = KINDS
    knobs = (URL,)
    setup_help = SETUP_HELP

    @property
    def demo(self) -> Any:
        """Its part of `svc-monitor demo` (demo.py)."""
        from .demo import DEMO
        return DEMO

    def sweep(self, text: str, environ: Mapping[str, str]) -> AcmeSweep:
        return AcmeSweep(text, environ)

    def request_timeout_s(self, environ: Mapping[str, str]) -> float:
        return 5.0

    def exchange_deadline_s(self, environ: Mapping[str, str]) -> float:
        return 8.0

    def parse_reply(self, reply: Any, now_s: float) -> Dict[str, Any]:
        if not isinstance(reply, dict):
            raise ValueError("not an object")
        placed: Dict[str, Any] = {"fiveHour": None, "sevenDay": None}
        for raw in reply.get("windows") or []:
            found = _window(raw)
            if found is None:
                continue
            slot = "fiveHour" if found[0] == FIVE_HOUR_S else "sevenDay" if found[0] == SEVEN_DAY_S else None
            if slot is not None and placed[slot] is None:
                placed[slot] = found[1]
        return placed

    def error(self, kind: str, message: Optional[str] = None, http_status: Optional[int] = None) -> Dict[str, Any]:
        kind = kind if kind in KINDS else "internal"
        return {"kind": kind, "message": MESSAGES[kind], "httpStatus": http_status}

    def clean_block(self, value: Any) -> Optional[Dict[str, Any]]:
        if not isinstance(value, dict):
            return None
        rows = []
        for raw in value.get("accounts") or []:
            if isinstance(raw, dict) and isinstance(raw.get("label"), str) and raw["label"].startswith("acme-"):
                row = {key: raw.get(key) for key in ROW_KEYS}
                error = raw.get("error")
                row["error"] = self.error(error.get("kind"), http_status=error.get("httpStatus")) \
                    if isinstance(error, dict) else None
                rows.append(row)
        return {"available": bool(rows), "probedAt": value.get("probedAt"), "accounts": rows}

    def summarize(self, block: Optional[Mapping[str, Any]], node: str, probed_at: int,
                  memory: Mapping[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        if block is None or block.get("available") is not True:
            return disabled_body(node), {}
        views = []
        for row in block["accounts"]:
            view = {"label": row["label"], "email": row["email"], "active": row["active"] is True,
                    "overallStatus": None, "representativeClaim": None, "bindingWindow": None,
                    "bindingStatus": None, "fiveHour": row["fiveHour"], "sevenDay": row["sevenDay"],
                    "error": row["error"], "provider": NAME, "sampledAt": row["sampledAt"]}
            view["bindingWindow"], view["bindingStatus"] = binding_window(view)
            views.append(view)
        return posture_body(node, probed_at, views), {}

    def poll_memory(self) -> None:
        return None

    @staticmethod
    def error_health(error: Any) -> Optional[str]:
        """A refused key, a rate-limited or unreachable endpoint; None for any other error."""
        kind = error.get("kind") if isinstance(error, dict) else None
        if kind == "auth":
            return "refused"
        if kind == "http" and error.get("httpStatus") == 429:
            return "limited"
        return "unreachable" if kind in ("transport", "timeout") else None


VENDOR = AcmeVendor()
