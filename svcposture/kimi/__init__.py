"""Kimi Code as a vendor (docs/kimi.md): `KIMI_API_KEY_*` API keys, one key each.

The common part is svcposture.keyvendor; what is Kimi's own is here, one job per module,
nothing imported here:

- vendor: its name, lines, base-URL knob and request, as the registry holds it
- setup:  its texts: where a key comes from, the sentence for a refused one and its fix
- reply:  the `GET /coding/v1/usages` reply as windows (pure)
- demo:   its part of `svc-monitor demo`: one key, and the endpoint's answers
"""
