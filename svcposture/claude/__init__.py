"""Claude accounts (docs/posture.md): the registry's default vendor, whose body is the contract's.

One job per module, nothing imported here:

- accounts:  the accounts env file's `MODEL_TOKEN_<SUFFIX>=` lines, their emails, the active one
- provider:  the provider's wire as the token-scoped child speaks it (header probe, usage probe)
- usage:     the usage reply's windows (pure)
- child:     the child's Claude part: the header probes' rows, the login's usage and email
- loginview: the body of `GET /api/login`, from the quota sampler's newest sample
- setup:     where a token comes from, as `svc-monitor init` writes and says it
- replies:   the provider's side of the wire, for its stand-ins (the demo, the tests' fake provider)
- demo:      its part of `svc-monitor demo`: three accounts, the login, the provider's answers
- summary:   the contract's posture body from the child's Claude block (pure)
- errors:    Claude's error vocabulary, and the health each error means
- sampler:   the quota sampler: the interactive login's usage polled into account.ratelimit.sampled
- jsonscan:  one member of the login's large profile file, read as a stream
- knobs:     its environment variables (the provider's URL, the probe's model)
- vendor:    the `Vendor` protocol over these modules
"""
