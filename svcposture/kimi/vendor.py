"""Kimi Code as the registry holds it (docs/kimi.md).

An account is `KIMI_API_KEY_<NAME>=<key>  # <email>`, the active one
`export KIMI_API_KEY="$KIMI_API_KEY_<NAME>"`, its label `kimi-<name>`. The child sends
`GET {SVC_KIMI_URL}/coding/v1/usages` with `Authorization: Bearer <key>`, as Kimi Code's own
CLI does for its `/usage` command.
"""
from ..keyvendor.vendor import KeyVendor

VENDOR = KeyVendor(__package__, "kimi", "Kimi", lines=("KIMI_API_KEY_", "KIMI_API_KEY"),
                   url=("SVC_KIMI_URL", "https://api.kimi.com"), request=("/coding/v1/usages", "Bearer"))
