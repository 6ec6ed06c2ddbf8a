"""GitHub Copilot as a vendor (docs/copilot.md): `COPILOT_TOKEN_*` GitHub tokens, one key each.

The common part is svcposture.keyvendor; what is Copilot's own is here, one job per module,
nothing imported here:

- vendor: its name, lines, base-URL knob and request, as the registry holds it
- setup:  its texts: where a key comes from, the sentence for a refused one and its fix
- reply:  the `GET /copilot_internal/user` reply as windows (pure)
- demo:   its part of `svc-monitor demo`: one token, and the endpoint's answers
"""
