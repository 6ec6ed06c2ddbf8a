"""Placeholder: svc-stack process control and the cloud-token projection land here."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence


def project_cloud_env(paths: Any) -> Dict[str, Any]:
    return {"changed": False}


def main(argv: Optional[Sequence[str]] = None) -> int:
    return 2
