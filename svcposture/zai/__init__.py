"""z.ai (GLM Coding Plan) as a vendor (docs/zai.md): `ZAI_API_KEY_*` API keys, one key each.

The common part is svcposture.keyvendor; what is z.ai's own is here, one job per module,
nothing imported here:

- vendor: its name, lines, base-URL knob and request, as the registry holds it
- setup:  its texts: where a key comes from, the sentence for a refused one and its fix
- reply:  the `GET /api/monitor/usage/quota/limit` reply as windows (pure)
- demo:   its part of `svc-monitor demo`: one key, and the endpoint's answers
"""
