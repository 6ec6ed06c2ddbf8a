"""Which Host and Origin values count as this monitor: the guard's policy (docs/http-api.md).

The handler asks TrustPolicy before a forced refresh, and before every route
when SVC_MONITOR_READ_GUARD=1; GUARD_MESSAGES are the refusals it may give.
"""
from __future__ import annotations

import ipaddress
import os
import re
from typing import Any, List, Optional, Sequence, Tuple

from ..settings import InvalidSetting

GUARD_MESSAGES = {
    "refresh_header_missing": "A forced refresh needs the X-Svc-Refresh request header.",
    "untrusted_host": "The Host header does not name this monitor.",
    "untrusted_origin": "The Origin header is not a trusted origin of this monitor.",
}

# `name[:port]`: a DNS-ish name or a bracketed IPv6 literal, nothing else.
# Userinfo, paths, spaces, percent-escapes and underscores all fail this.
_HOST_RE = re.compile(
    r"^(?:\[(?P<v6>[0-9A-Fa-f:.]{2,45})\]|(?P<name>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})))"
    r"(?::(?P<port>[0-9]{1,5}))?$")
_ORIGIN_RE = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<hostport>[^/?#\s]*)$")
_QUAD_RE = re.compile(r"^[0-9]{1,3}(?:\.[0-9]{1,3}){3}$")


def split_host(value: str) -> Optional[Tuple[str, Optional[int]]]:
    """(normalised name, port or None) of a Host value, or None when it is not one.

    Names are lower-cased with one trailing dot dropped; IPv6 stays bracketed."""
    match = _HOST_RE.match(value)
    if not match:
        return None
    port: Optional[int] = None
    if match.group("port") is not None:
        port = int(match.group("port"))
        if not 0 < port < 65536:
            return None
    v6 = match.group("v6")
    if v6 is not None:
        try:
            return "[%s]" % ipaddress.IPv6Address(v6).compressed, port
        except ValueError:
            return None
    name = match.group("name").lower()
    if name.endswith("."):
        name = name[:-1]
    if not name or name.endswith(".") or ".." in name or name.endswith("-"):
        return None
    return name, port


def _is_loopback_v4(name: str) -> bool:
    if not _QUAD_RE.match(name):
        return False
    try:
        return ipaddress.IPv4Address(name).is_loopback
    except ValueError:
        return False


class TrustPolicy:
    """Which Host and Origin values count as this monitor (docs/http-api.md)."""

    def __init__(self, bind: str, port: int, node: str, *, os_hostname: Optional[str] = None,
                 extra_hosts: str = "", extra_origins: str = "") -> None:
        self.port = port
        bind_l = bind.strip().lower()
        loopback_or_wildcard = bind_l in ("", "0.0.0.0", "::", "[::]", "localhost")
        if not loopback_or_wildcard:
            try:
                address = ipaddress.ip_address(bind_l.strip("[]"))
                loopback_or_wildcard = address.is_loopback or address.is_unspecified
            except ValueError:
                loopback_or_wildcard = False
        self.loopback = loopback_or_wildcard
        names = set()
        for raw in (node,) + ((os_hostname or os.uname().nodename or "",) if loopback_or_wildcard else ()):
            parsed = split_host(raw) if raw else None
            if parsed:
                names.add(parsed[0])
                if loopback_or_wildcard and "." in parsed[0] and not parsed[0].startswith("["):
                    names.add(parsed[0].split(".")[0])
        if loopback_or_wildcard:
            names.update(("localhost", "[::1]"))
        else:
            own = split_host(bind_l if ":" not in bind_l or bind_l.startswith("[") else "[%s]" % bind_l)
            if own:
                names.add(own[0])
        self.names = frozenset(names)
        self.extra_hosts: List[Tuple[str, Any]] = []
        for entry in (e.strip() for e in extra_hosts.split(",")):
            if not entry:
                continue
            any_port = entry.endswith(":*")
            parsed = split_host(entry[:-2] if any_port else entry)
            if parsed is None:
                raise InvalidSetting("SVC_MONITOR_TRUSTED_HOSTS: %r is not name, name:port or name:*" % entry)
            self.extra_hosts.append((parsed[0], "*" if any_port else parsed[1]))
        self.extra_origins = frozenset(
            e.strip().lower().rstrip("/") for e in extra_origins.split(",") if e.strip())

    def name_trusted(self, name: str) -> bool:
        return name in self.names or (self.loopback and _is_loopback_v4(name))

    def _hostport_trusted(self, name: str, port: Optional[int], default_port: Optional[int]) -> bool:
        for entry_name, entry_port in self.extra_hosts:
            if entry_name != name:
                continue
            if entry_port == "*":
                return True
            if entry_port is None:
                if port is None or port == self.port:
                    return True
            elif port is None or port == entry_port:
                return True
        if not self.name_trusted(name):
            return False
        effective = port if port is not None else default_port
        return effective is None or effective == self.port

    def host_trusted(self, values: Sequence[str]) -> bool:
        if len(values) != 1:
            return False  # missing, or duplicated to confuse a proxy
        parsed = split_host(values[0])
        return parsed is not None and self._hostport_trusted(parsed[0], parsed[1], None)

    def origin_trusted(self, values: Sequence[str]) -> bool:
        if len(values) != 1:
            return False
        value = values[0].strip()
        if value.lower().rstrip("/") in self.extra_origins and value.lower() != "null":
            return True
        match = _ORIGIN_RE.match(value)
        if not match:
            return False
        scheme = match.group("scheme").lower()
        if scheme not in ("http", "https"):
            return False
        parsed = split_host(match.group("hostport"))
        if parsed is None:
            return False
        default = 80 if scheme == "http" else 443
        name, port = parsed
        if port is None:
            port = default
        return self._hostport_trusted(name, port, default)
