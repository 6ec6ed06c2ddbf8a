"""One vendor's posture service built as the node builds it, for tests that drive one in-process."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from svcposture.paths import Paths
from svcposture.posture.service import PostureService
from svcposture.settings import Settings
from svcposture.vendors import default_vendor, vendor_named


def posture_service(paths: Paths, *, node: str, latch: Any = None, environ: Optional[Mapping[str, str]] = None,
                    settings: Optional[Settings] = None, provider: Optional[str] = None,
                    reset_margin_s: Optional[float] = None, **kw: Any) -> PostureService:
    """The posture service of `provider` (default: the registry's default vendor) over `paths`;
    `reset_margin_s` shortens the wait after a reset for the settings it is built with."""
    environ = paths.environ if environ is None else environ
    settings = Settings.from_environ(environ) if settings is None else settings
    if reset_margin_s is not None:
        settings = Settings(**dict({name: getattr(settings, name) for name in Settings.__slots__},
                                   reset_margin_s=reset_margin_s))
    vendor = default_vendor() if provider is None else vendor_named(provider)
    return PostureService(vendor, paths, node=node, settings=settings, latch=latch, environ=environ,
                          speaks_for_node=vendor is default_vendor(), **kw)
