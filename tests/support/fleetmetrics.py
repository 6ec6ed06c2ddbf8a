"""A thousand monitors' /metrics in one process: one listening socket per host on its own
loopback address (127.0.x.y, all on one port), served by one selector thread.

Each host's body is rendered by the monitor's own exposition functions from a
posture body, so Prometheus scrapes exactly what a real monitor would say. A
host can be taken down (its socket closed: connection refused) and its
figures changed while Prometheus scrapes.

    with FleetMetrics(1000) as fleet:
        roster = fleet.hosts            # ["127.0.1.1", ...]
        fleet.port                      # the one port every host listens on
"""
from __future__ import annotations

import selectors
import socket
import threading
import time
from typing import Dict, List, Optional, Set, Tuple

from svcposture._time import iso_from_ms
from svcposture.monitor.exposition import render_metrics, render_trajectory_metrics

HOSTS_PER_OCTET = 250
MAX_REQUEST = 8192


def host_address(i: int) -> str:
    return "127.0.%d.%d" % (1 + i // HOSTS_PER_OCTET, 1 + i % HOSTS_PER_OCTET)


def posture_body(node: str, active: str, five_pct: float, seven_pct: float) -> Dict[str, object]:
    """The /api/accounts body a monitor with two accounts would give (what /metrics renders)."""
    now = int(time.time() * 1000)

    def window(pct: float, hours: float) -> Dict[str, object]:
        return {"pct": pct, "resetsAt": iso_from_ms(now + int(hours * 3600000)),
                "status": "rejected" if pct >= 100 else "allowed"}

    accounts = []
    for label, five, seven in ((active, five_pct, seven_pct), ("spare-" + node.split(".")[-1], 1.0, 2.0)):
        five_hour = window(five, 2)
        five_hour["status"] = "rejected" if five >= 100 else "allowed_warning" if five >= 80 else "allowed"
        accounts.append({"label": label, "active": label == active, "fiveHour": five_hour,
                         "sevenDay": window(seven, 72), "bindingWindow": "five_hour",
                         "bindingStatus": five_hour["status"], "error": None})
    status = "rejected" if five_pct >= 100 else "degraded" if five_pct >= 80 else "ok"
    return {"available": True, "node": node, "status": status, "active": accounts[0], "accounts": accounts,
            "probedAt": now}


class FleetMetrics:
    def __init__(self, count: int) -> None:
        self.hosts = [host_address(i) for i in range(count)]
        self._lock = threading.Lock()
        self._bodies: Dict[str, bytes] = {}
        self.accounts: Dict[str, Tuple[str, float, float]] = {}
        for i, host in enumerate(self.hosts):
            self.set_account(host, "acct-%d" % (i % 7), float(i % 80), float((i * 3) % 90))
        self._selector = selectors.DefaultSelector()
        self._listeners: Dict[str, socket.socket] = {}
        self.down: Set[str] = set()
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.port = self._bind_all()

    # ------------------------------------------------------------ state

    def set_account(self, host: str, active: str, five_pct: float, seven_pct: float) -> None:
        body = posture_body(host, active, five_pct, seven_pct)
        wall = iso_from_ms(int(time.time() * 1000) + 1800000) if 80 <= five_pct < 100 else None
        forecast = {"ratePctPerHour": 5.0, "pctAtReset": five_pct + 10, "wallAt": wall}
        windows = [(active, "five_hour", forecast, "claude")]
        text = render_metrics([("claude", {"probeRuns": 3, "probeErrors": 0, "lastSuccessMs": int(time.time() * 1000),
                               "last": body})], subscribers=0, subscribers_max=16)
        text += render_trajectory_metrics({"windows": windows, "alerts": {}})
        with self._lock:
            self._bodies[host] = text.encode("utf-8")
            self.accounts[host] = (active, five_pct, seven_pct)

    def take_down(self, host: str) -> None:
        """Close the host's socket (on the serving thread, at its next turn): scrapes are refused."""
        with self._lock:
            self.down.add(host)
        if self._thread is None:
            self._close_listener(host)

    def _close_listener(self, host: str) -> None:
        sock = self._listeners.pop(host, None)
        if sock is not None:
            self._close(sock)

    # ------------------------------------------------------------ serving

    def _bind_all(self) -> int:
        for _ in range(20):
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
            probe.close()
            sockets: List[socket.socket] = []
            try:
                for host in self.hosts:
                    sock = socket.socket()
                    sockets.append(sock)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind((host, port))
                    sock.listen(64)
                    sock.setblocking(False)
            except OSError:
                for sock in sockets:
                    sock.close()
                continue
            for host, sock in zip(self.hosts, sockets):
                self._listeners[host] = sock
                self._selector.register(sock, selectors.EVENT_READ, ("listen", host))
            return port
        raise RuntimeError("no port free on every one of %d loopback addresses" % len(self.hosts))

    def start(self) -> "FleetMetrics":
        self._thread = threading.Thread(target=self._serve, name="fleet-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()
        self._selector.close()

    def __enter__(self) -> "FleetMetrics":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                closing = [h for h in self.down if h in self._listeners]
            for host in closing:
                self._close_listener(host)
            for key, events in self._selector.select(timeout=0.1):
                kind, host = key.data[0], key.data[1]
                try:
                    if kind == "listen":
                        self._accept(key.fileobj, host)
                    elif events & selectors.EVENT_READ:
                        self._read(key)
                    else:
                        self._write(key)
                except OSError:
                    self._close(key.fileobj)

    def _accept(self, listener: socket.socket, host: str) -> None:
        try:
            conn, _ = listener.accept()
        except (BlockingIOError, OSError):
            return
        conn.setblocking(False)
        self._selector.register(conn, selectors.EVENT_READ, ("conn", host, bytearray(), bytearray()))

    def _close(self, sock: socket.socket) -> None:
        try:
            self._selector.unregister(sock)
        except (KeyError, ValueError):
            pass
        sock.close()

    def _read(self, key: selectors.SelectorKey) -> None:
        _, host, inbuf, outbuf = key.data
        chunk = key.fileobj.recv(65536)
        if not chunk or host in self.down:
            self._close(key.fileobj)
            return
        inbuf.extend(chunk)
        if len(inbuf) > MAX_REQUEST:
            self._close(key.fileobj)
            return
        while b"\r\n\r\n" in inbuf:
            end = inbuf.index(b"\r\n\r\n") + 4
            del inbuf[:end]
            with self._lock:
                body = self._bodies[host]
                self.scrapes += 1
            outbuf.extend(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(body) + body)
        if outbuf:
            self._write(key)

    def _write(self, key: selectors.SelectorKey) -> None:
        _, host, inbuf, outbuf = key.data
        try:
            sent = key.fileobj.send(outbuf)
        except BlockingIOError:
            sent = 0
        del outbuf[:sent]
        self._selector.modify(key.fileobj, selectors.EVENT_WRITE if outbuf else selectors.EVENT_READ, key.data)
