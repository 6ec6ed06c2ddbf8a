"""Noticing that a stream's client hung up while its thread waits for the next frame.

A stream thread spends its life in Broadcast.wait and only touches its socket
to write, so on its own it would learn of a hang-up at the next write, up to
a keepalive interval later, holding a subscriber slot all that time. One
selector thread watches every waiting stream's socket instead: the kernel
reports end-of-file (or a reset) as readability, the watcher marks the stream
gone and wakes the waiters once per batch, and the thread ends and frees its
slot. No stream is polled on a timer.
"""
from __future__ import annotations

import selectors
import socket
import threading
from typing import Callable

_DISCARD_BYTES = 65536


class HangupWatch:
    """Watches sockets for their peer's end-of-file; `on_hangup()` runs after each
    batch of hang-ups (to wake the threads that wait on them)."""

    def __init__(self, on_hangup: Callable[[], None]) -> None:
        # Started at once, so that the process holds the same threads and fds
        # before its first stream as after its last one.
        self._on_hangup = on_hangup
        self._lock = threading.Lock()
        self._closed = False
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        threading.Thread(target=self._run, name="svc-stream-hangups", daemon=True).start()

    def watch(self, sock: socket.socket) -> threading.Event:
        """An Event set once the peer of `sock` hangs up; unwatch() before closing `sock`."""
        gone = threading.Event()
        with self._lock:
            if self._closed:
                return gone
            try:
                self._selector.register(sock, selectors.EVENT_READ, gone)
            except (KeyError, ValueError, OSError):
                return gone  # already watched or already closed: the write path still notices
        _poke(self._wake_w)  # a select()-based selector only sees new sockets on its next call
        return gone

    def unwatch(self, sock: socket.socket) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                self._selector.unregister(sock)
            except (KeyError, ValueError, OSError):
                pass

    def close(self) -> None:
        with self._lock:
            self._closed = True
        _poke(self._wake_w)

    def _run(self) -> None:
        selector = self._selector
        while True:
            ready = selector.select()
            hung_up = 0
            with self._lock:
                if self._closed:
                    break
                for key, _ in ready:
                    if key.data is None:
                        _drain(self._wake_r)
                        continue
                    if selector.get_map().get(key.fd) is not key:
                        continue  # unwatched since select() returned
                    if _peer_gone(key.fileobj):  # type: ignore[arg-type]
                        selector.unregister(key.fileobj)
                        key.data.set()
                        hung_up += 1
            if hung_up:
                try:
                    self._on_hangup()
                except Exception:  # the streams still end at their next write
                    pass
        with self._lock:
            selector.close()
            self._wake_r.close()
            self._wake_w.close()


def _peer_gone(sock: socket.socket) -> bool:
    """True at end-of-file or on a reset. Bytes a client sends on a stream are
    read and dropped: nothing it says after its request is ever answered."""
    try:
        data = sock.recv(_DISCARD_BYTES, socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError, socket.timeout):
        return False
    except OSError:
        return True
    return not data


def _poke(sock: socket.socket) -> None:
    try:
        sock.send(b"\0")
    except OSError:
        pass  # the buffer is full: a wake-up is already pending


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except OSError:
        pass
