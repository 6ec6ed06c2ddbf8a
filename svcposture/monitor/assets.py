"""The dashboard's files in static/: the routes that serve them, and their loading.

The route table is a whitelist; a request path never becomes a file path. The
files are read once, when the server starts, and served from memory.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Tuple

STATIC_DIR = Path(__file__).parent / "static"
# Dashboard assets served from memory; the names are a whitelist, never a path.
STATIC_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
    "/static/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "/fleet": ("fleet.html", "text/html; charset=utf-8"),
    "/static/fleet.css": ("fleet.css", "text/css; charset=utf-8"),
    "/static/fleet.js": ("fleet.js", "text/javascript; charset=utf-8"),
    # Named by both pages: without it the browser asks for /favicon.ico and logs the 404.
    "/static/favicon.svg": ("favicon.svg", "image/svg+xml"),
}
PAGE_HEADERS = (b"Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n"
                b"X-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n"
                b"Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
                b"connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
                b"frame-ancestors 'none'\r\n")


def load_static() -> Dict[str, Tuple[bytes, str]]:
    """Route -> (body, content type); a missing file becomes a one-line text/plain note."""
    assets: Dict[str, Tuple[bytes, str]] = {}
    for route, (name, ctype) in STATIC_FILES.items():
        try:
            assets[route] = ((STATIC_DIR / name).read_bytes(), ctype)
        except OSError:
            assets[route] = (("dashboard asset %s is missing from the svcposture package\n" % name)
                             .encode("utf-8"), "text/plain; charset=utf-8")
    return assets
