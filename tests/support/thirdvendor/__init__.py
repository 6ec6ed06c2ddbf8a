"""A stand-in third vendor, "acme", registered only by the tests (docs/vendors.md).

It is the proof that a vendor is one package and one registry line: nothing
outside this package names it. A node gets it with `SVC_VENDORS=tests.support.thirdvendor`
(every command's entry point and the probe child import this module and
register `VENDOR`), or a library user with `vendors.register_vendor(VENDOR)`.

Its accounts are `ACME_KEY_<NAME>=<key>  # <email>` lines, the active one
`export ACME_KEY="$ACME_KEY_<NAME>"`, labels `acme-<name>`. Its child probe
sends `GET {SVC_ACME_URL}/v1/quota` with `Authorization: Bearer <key>` (its
one knob, declared in `vendor.py` and read through `settings.knob_value`); the
reply is `{"windows": [{"seconds", "used", "resets"}]}` (`used` a fraction,
`resets` epoch seconds), placed by length as Codex's are. The stand-in
server is `tests/support/thirdvendor/server.py`. Its optional members are
`setup_help` (what `svc-monitor init` writes about an acme key) and `demo`
(`demo.py`: its account in `svc-monitor demo`, answered on the demo's
simulated provider).
"""
from __future__ import annotations

from .vendor import VENDOR

__all__ = ["VENDOR"]
