"""A fleet of thousands of monitors in VictoriaMetrics without thousands of processes: each
host's /metrics text, rendered by the monitor's own exposition functions, is labelled as a
scrape would label it (`node`, `instance`, `job`, plus `up`) and fed to VictoriaMetrics through
its import API.

    fleet = BigFleet(10000)             # host-00000 ... host-09999, three accounts each
    fleet.feed(vm.base)                 # POST /api/v1/import/prometheus, then flush
    fleet.expected_newest(key)          # the host whose probe of that account is the newest

Host i holds accounts i, i+1 and i+2 of a pool of POOL logins (so each login is on about
3 x count / POOL hosts, under the labels acct1..acct3 depending on the host), the first one
active; every 50th host's third account has no email (no key). Host i last probed i x 37 ms
before `now`, so every account's newest reading is on one known host. Every STALE_EVERY-th
host's scrapes fail (up 0, no other series) and the last MISSING hosts are in the roster only.
Every account carries its health (docs/posture.md): `ok`, but on every REFUSED_EVERY-th host
the provider refused the second account's token before it was ever read (no figures, no
reading time: only its health and status say it is there).
"""
from __future__ import annotations

import time
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

from svcposture._time import iso_from_ms
from svcposture.accountkey import account_key
from svcposture.monitor.exposition import account_keys, render_metrics, render_trajectory_metrics

POOL = 1000
STALE_EVERY = 500
REFUSED_EVERY = 100
MISSING = 5
PORT = 7400


def email(k: int) -> str:
    return "user%04d@fleet.invalid" % (k % POOL)


class BigFleet:
    def __init__(self, count: int, now_ms: Optional[int] = None) -> None:
        self.count = count
        self.now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        self.hosts = ["host-%05d" % i for i in range(count)]
        self.roster = self.hosts + ["gone-%d" % i for i in range(MISSING)]

    # ------------------------------------------------------------ what each host says

    def probed_ms(self, i: int) -> int:
        return self.now_ms - 1000 - i * 37

    def five_pct(self, i: int, slot: int) -> float:
        return float((i * 7 + slot * 13) % 100)

    def logins(self, i: int) -> List[Tuple[str, Optional[str]]]:
        """(label, email or None) of host i's accounts, the active one first."""
        out: List[Tuple[str, Optional[str]]] = []
        for slot in range(3):
            keyless = slot == 2 and i % 50 == 0
            out.append(("scratch" if keyless else "acct%d" % ((i + slot) % 3 + 1), None if keyless else email(i + slot)))
        return out

    def stale(self, i: int) -> bool:
        return i % STALE_EVERY == STALE_EVERY - 1

    def refused(self, i: int, slot: int) -> bool:
        """Whether host i's account in `slot` has a token the provider refused (never read)."""
        return slot == 1 and i % REFUSED_EVERY == REFUSED_EVERY - 7

    def posture(self, i: int) -> Dict[str, Any]:
        accounts = []
        for slot, (label, mail) in enumerate(self.logins(i)):
            if self.refused(i, slot):
                accounts.append({"label": label, "email": mail, "active": False, "health": "refused", "readAt": None,
                                 "error": {"kind": "auth", "message": "the provider refused the token"}})
                continue
            five = self.five_pct(i, slot)
            status = "rejected" if five >= 98 else "allowed_warning" if five >= 80 else "allowed"
            accounts.append({"health": "ok", "label": label, "email": mail, "active": slot == 0, "error": None,
                             "bindingWindow": "five_hour", "bindingStatus": status,
                             "fiveHour": {"pct": five, "resetsAt": iso_from_ms(self.now_ms + 7200000), "status": status},
                             "sevenDay": {"pct": float(i % 90), "resetsAt": iso_from_ms(self.now_ms + 259200000),
                                          "status": "allowed"}})
        node_status = {"allowed": "ok", "allowed_warning": "degraded", "rejected": "rejected"}[
            accounts[0]["bindingStatus"]]
        return {"available": True, "node": self.hosts[i], "status": node_status, "active": accounts[0],
                "accounts": accounts, "probedAt": self.probed_ms(i)}

    def metrics_text(self, i: int) -> str:
        last = self.posture(i)
        text = render_metrics([("claude", {"probeRuns": 3, "probeErrors": 0, "lastSuccessMs": self.probed_ms(i), "last": last})],
                              subscribers=0, subscribers_max=16)
        five = last["accounts"][0]["fiveHour"]["pct"]
        wall = iso_from_ms(self.now_ms + 1800000 + i * 1000) if five >= 80 else None
        windows = [(last["accounts"][0]["label"], "five_hour", {"ratePctPerHour": 5.0, "pctAtReset": five + 10,
                                                                "wallAt": wall}, "claude")]
        return text + render_trajectory_metrics({"windows": windows, "alerts": {}}, account_keys(("claude", last)))

    # ------------------------------------------------------------ as a scrape stores it

    def lines(self, i: int) -> List[str]:
        host = self.hosts[i]
        target = 'node="%s",instance="%s:%d",job="svc-monitor"' % (host, host, PORT)
        if self.stale(i):
            return ["up{%s} 0" % target]
        out = ["up{%s} 1" % target]
        for line in self.metrics_text(i).splitlines():
            if not line or line.startswith("#"):
                continue
            name, _, rest = line.partition("{")
            if rest:
                # The monitor's own `node` label is kept as `exported_node`, as Prometheus does.
                out.append("%s{%s,%s" % (name, target, rest.replace('node="', 'exported_node="', 1)
                                         if name == "svc_node_active_account" else rest))
            else:
                metric, _, value = line.partition(" ")
                out.append("%s{%s} %s" % (metric, target, value))
        return out

    def feed(self, base: str, batch: int = 1000) -> None:
        """Import every host's series into VictoriaMetrics at `base`, then make them searchable."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        for start in range(0, self.count, batch):
            body = "\n".join(line for i in range(start, min(self.count, start + batch)) for line in self.lines(i))
            request = urllib.request.Request(base + "/api/v1/import/prometheus", data=(body + "\n").encode(),
                                             method="POST")
            with opener.open(request, timeout=120) as response:
                assert response.status in (200, 204), response.status
        with opener.open(base + "/internal/force_flush", timeout=60) as response:
            assert response.status == 200

    # ------------------------------------------------------------ what a reader must find

    def expected_newest(self) -> Dict[str, Tuple[str, float]]:
        """account key -> (the host holding its newest reading, its 5-hour pct there)."""
        best: Dict[str, Tuple[int, str, float]] = {}
        for i in range(self.count):
            if self.stale(i):
                continue
            for slot, (_, mail) in enumerate(self.logins(i)):
                key = account_key("claude", mail)
                if key is not None and not self.refused(i, slot) and (key not in best or self.probed_ms(i) > best[key][0]):
                    best[key] = (self.probed_ms(i), self.hosts[i], self.five_pct(i, slot))
        return {key: (host, pct) for key, (_, host, pct) in best.items()}
