"""The child's part for one key vendor (docs/vendors.md): its entries, the active one, one exchange each.

Runs in the token-scoped child beside every other vendor's sweep. The keys come from the
child's own environment after the shell sourced the accounts env file (the line parser reads
names and comments only); an entry whose value is empty or a placeholder is unusable and gets
no row. The active account is the first, in file order, whose key equals the vendor's active
variable. Each usable entry gets one exchange (exchange.fetch) on the child's pool; its row
carries no key: every string the reply put into it that shares a run of any secret the child
holds is dropped (probe.scrub).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from .. import _time
from ..envfile.entries import account_values, usable
from ..probe.scrub import scrub_row
from ..vendor import check_listing

# What a row keeps of a sample.
SAMPLE_KEYS = ("fiveHour", "sevenDay", "extraWindows", "planType")


def empty_row(entry: Mapping[str, Any], provider: str) -> Dict[str, Any]:
    return {"label": entry["label"], "email": entry["email"], "active": entry["active"], "provider": provider,
            "source": None, "sampledAt": None, "fiveHour": None, "sevenDay": None, "extraWindows": [],
            "planType": None, "error": None}


def probe_key(vendor: Any, entry: Mapping[str, Any], environ: Mapping[str, str], timeout_s: float,
              secrets: List[str]) -> Dict[str, Any]:
    """One account's row for this sweep: its windows, or its error."""
    from .exchange import fetch

    row = empty_row(entry, vendor.name)
    result = fetch(vendor, entry["key"], environ, timeout_s)
    if "sample" in result:
        row.update({key: result["sample"].get(key) for key in SAMPLE_KEYS}, source="api",
                   sampledAt=_time.now_ms())
        row["extraWindows"] = row["extraWindows"] or []
    else:
        row["error"] = result["error"]
    scrub_row(row, secrets + [entry["key"]])
    return row


class KeySweep:
    """One key vendor's part of a `headers` sweep, run on its own pool in the child."""

    def __init__(self, vendor: Any, text: str, environ: Mapping[str, str]) -> None:
        lines = vendor.lines
        found, self.unusable = account_values(text, environ, lines.entry_re(), lines.entry_prefix, lines.label,
                                              usable)
        active_key = (environ.get(lines.active_var) or "").strip()
        self.entries: List[Dict[str, Any]] = [
            {"label": label, "email": email, "key": value, "active": bool(active_key) and value == active_key}
            for _name, label, email, value in found]
        matching = [e["label"] for e in self.entries if e["active"]]
        self.active: Optional[str] = matching[0] if matching else None
        self.duplicates = matching if len(matching) > 1 else []
        for entry in self.entries:
            entry["active"] = entry["label"] == self.active
        self.vendor = vendor
        self.environ = environ
        self.present = bool(found or self.unusable)
        self.secrets: List[str] = [e["key"] for e in self.entries]
        self.futures: List[Any] = []

    def check(self) -> Optional[Dict[str, Any]]:
        """What `probe check` shows of the vendor's lines (no network)."""
        if not self.present:
            return None
        return check_listing(self.entries, self.unusable, self.active, self.duplicates)

    def submit(self, pool: Any, timeout_s: float, secrets: List[str]) -> List[Any]:
        """One exchange per key on `pool`; `secrets` (every vendor's keys) are scrubbed from its row."""
        self.futures = [pool.submit(probe_key, self.vendor, entry, self.environ, timeout_s, list(secrets))
                        for entry in self.entries]
        return self.futures

    def block(self, cut: str = "sweep") -> Optional[Dict[str, Any]]:
        """The vendor's block once its futures are done or abandoned; None with no line of it.

        An exchange still running is a timeout, in the words of whose deadline ended it: the
        vendor's own (`exchange`) or the sweep's."""
        if not self.present:
            return None
        late = self.vendor.errors.messages["timeout"]
        late = late.no_answer if cut == "exchange" else late.sweep_deadline
        rows = []
        for entry, future in zip(self.entries, self.futures):
            if future.done() and future.exception() is None:
                rows.append(future.result())
                continue
            row = empty_row(entry, self.vendor.name)
            row["error"] = self.vendor.errors.error("timeout", late) if not future.done() \
                else self.vendor.errors.error("internal")
            rows.append(row)
        return {"available": bool(self.entries), "probedAt": _time.now_ms(), "active": self.active,
                "duplicateActive": self.duplicates, "unusable": self.unusable, "accounts": rows}
