"""Which bind addresses reach this machine alone (the loopback), and which reach a network."""
from __future__ import annotations

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether a listener bound to `host` can be reached from this machine alone.

    True for 127.0.0.0/8, ::1 (also written ::ffff:127.x.y.z) and the name
    `localhost`. Everything else is off the loopback: the wildcards (0.0.0.0,
    ::, an empty host) and every other name, which is not resolved here, so a
    name that happens to resolve to 127.0.0.1 still counts as a network address.
    The rules that protect a network listener then apply, which fails closed.
    """
    import ipaddress

    name = host.strip().strip("[]").lower().rstrip(".")
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
