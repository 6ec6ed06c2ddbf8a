"""Placeholder: heartbeat publisher, peer status, set-anchor, doctor and HRW land here."""
from __future__ import annotations

from typing import Any


def add_commands(sub: Any) -> None:
    pass


class Publisher:
    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def start_publisher(paths: Any, environ: Any, node: str, account_status: Any, log: Any) -> Publisher:
    publisher = Publisher()
    publisher.start()
    return publisher
