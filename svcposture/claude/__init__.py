"""The first vendor: Claude accounts (docs/posture.md).

One job per module, nothing imported here:

- accounts:  the accounts env file's `MODEL_TOKEN_<SUFFIX>=` lines, their emails, the active one
- provider:  the provider's wire as the token-scoped child speaks it (header probe, usage probe)
- usage:     the usage reply's windows (pure)
- child:     the child's Claude part: the header probes' rows, the login's usage and email
- loginview: the body of `GET /api/login`, from the quota sampler's newest sample
- setup:     where a token comes from, as `svc-monitor init` writes and says it
- replies:   the provider's side of the wire, for its stand-ins (the demo, the tests' fake provider)
- demo:      its part of `svc-monitor demo`: three accounts, the login, the provider's answers
"""
