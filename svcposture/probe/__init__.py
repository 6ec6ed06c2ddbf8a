"""The probe (docs/posture.md): the token-scoped child and the parent that bounds it.

`python -m svcposture.probe` is its command line (__main__). One job per module,
nothing imported here:

- runner:       the parent: opens the accounts env file, starts the child, bounds it, reads its answer
- child:        the child: sources nothing itself, runs each registered vendor's sweep
- providerhttp: how the child reads a provider's reply (its request timeout, a timeout or
                transport error, retry-after); the requests go through svcposture._http
- backoff:      how long a usage poller waits after a 429
- text:         a probe's result in words, for a person
- scrub:        what the child drops from a row: any string from outside that carries a piece of a secret
"""
