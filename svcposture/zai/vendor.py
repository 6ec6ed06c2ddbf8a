"""z.ai as the registry holds it (docs/zai.md).

An account is `ZAI_API_KEY_<NAME>=<key>  # <email>`, the active one
`export ZAI_API_KEY="$ZAI_API_KEY_<NAME>"`, its label `zai-<name>`. The child sends
`GET {SVC_ZAI_URL}/api/monitor/usage/quota/limit` with `Authorization: Bearer <key>`.
z.ai's own plugins send the bare key; api.z.ai takes both, and `Bearer` is what its API
reference documents and what the other readers of this endpoint send (docs/zai.md says where
each was seen).
"""
from ..keyvendor.vendor import KeyVendor

VENDOR = KeyVendor(__package__, "zai", "z.ai", lines=("ZAI_API_KEY_", "ZAI_API_KEY"),
                   url=("SVC_ZAI_URL", "https://api.z.ai"), request=("/api/monitor/usage/quota/limit", "Bearer"))
