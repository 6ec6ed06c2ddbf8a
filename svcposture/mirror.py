"""Placeholder: classify, bundle export/join, roster and cluster sync land here."""
from __future__ import annotations

from typing import Any


def add_commands(sub: Any) -> None:
    pass
