"""The second vendor: Codex accounts beside Claude's (docs/codex.md).

One job per module, nothing imported here:

- accounts:  the accounts env file's `CODEX_HOME_<NAME>=<dir>` lines, labels, the active one
- authfile:  a login's auth.json, read carefully (child only: it holds the tokens)
- usage:     the usage reply and the session log's rate limits as windows (pure)
- session:   the newest rate-limit sample in a login's session logs (the zero-call path)
- errors:    the fixed vocabulary of a Codex account's errors, with the fix to show
- child:     the child's Codex sweep: session first, then the usage request
- report:    the child's `codex` block, whitelisted for the monitor
- pollstate: the monitor's memory between sweeps (last sample, usage floor, backoff)
- setup:     where a login comes from, as `svc-monitor init` writes and says it
- demo:      its part of `svc-monitor demo`: one login and the usage endpoint's answers
"""
