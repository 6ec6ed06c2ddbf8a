"""Hostile clients for the monitor: many sockets each trickling a request, and
the figures of a process under them (descriptors, CPU, RSS) read from /proc.

    clients = Tricklers(port, count=1100, hostile=60)
    clients.fill()
    clients.tick()     # once a second: a byte (or a 16 KB chunk) on every socket
    proc_figures(pid)  # {"cpu_s", "rss_mb", "fds"}

Used by tests/monitor/test_hostile_clients.py and scripts/bench_tricklers.py.
"""
from __future__ import annotations

import errno
import os
import resource
import socket
import time
from typing import Any, Dict, List, Mapping

from .monitor import Monitor


def proc_figures(pid: int) -> Dict[str, float]:
    """CPU seconds (user + system), RSS in MB and open descriptors of process `pid`."""
    with open("/proc/%d/stat" % pid) as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/%d/status" % pid) as fh:
        rss_kb = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
    return {"cpu_s": (int(fields[11]) + int(fields[12])) / ticks, "rss_mb": rss_kb / 1024.0,
            "fds": float(len(os.listdir("/proc/%d/fd" % pid)))}


class Tricklers:
    """`count` non-blocking client sockets, each sending a request a little at a
    time and never finishing it; the first `hostile` send 16 KB header chunks."""

    def __init__(self, port: int, count: int = 1100, hostile: int = 60) -> None:
        self.port = port
        self.count = count
        self.hostile = hostile
        self.socks: List[socket.socket] = []
        self.born: Dict[int, float] = {}
        self.connects = 0
        self.closed_by_monitor = 0
        self.longest_life = 0.0

    def _connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", self.port))
        self.born[id(sock)] = time.monotonic()
        self.connects += 1
        return sock

    def fill(self) -> None:
        while len(self.socks) < self.count:
            self.socks.append(self._connect())

    def tick(self) -> None:
        """One byte (or one 16 KB chunk) on every socket; replace the ones the monitor closed."""
        for i, sock in enumerate(self.socks):
            chunk = (b"X-Big-%d: " % i + b"h" * 16384) if i < self.hostile else b"G"
            try:
                gone = self._closed(sock)
                if not gone:
                    sock.send(chunk)
            except BlockingIOError:
                gone = False
            except OSError as exc:
                gone = exc.errno not in (errno.ENOTCONN, errno.EINPROGRESS)
            if gone:
                life = time.monotonic() - self.born.pop(id(sock), time.monotonic())
                self.longest_life = max(self.longest_life, life)
                self.closed_by_monitor += 1
                sock.close()
                self.socks[i] = self._connect()

    @staticmethod
    def _closed(sock: socket.socket) -> bool:
        try:
            while True:
                data = sock.recv(65536)  # a 431 reply, or the end of the stream
                if not data:
                    return True
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            return exc.errno not in (errno.ENOTCONN,)

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


def raise_own_limit(need: int) -> Any:
    """Raise this process's soft descriptor limit to `need`; returns the old (soft, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        raise RuntimeError("%d descriptors needed; the hard limit is %d" % (need, hard))
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need), hard))
    return soft, hard


def start_under_limit(env: Mapping[str, str], args: List[str], nofile: int, timeout: float = 30.0) -> Monitor:
    """A monitor started with RLIMIT_NOFILE `nofile` (this process's limit is
    lowered for the fork only: the child inherits it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))
    try:
        mon = Monitor(env, args).start(wait=False)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        mon.wait_ready(timeout)
    except BaseException:
        mon.stop(check=False)
        raise
    return mon
