"""The posture service (docs/posture.md): one per registered vendor, over the probe.

One job per module, nothing imported here:

- service:       one vendor's posture: cache, single flight, the periodic probe, its subscribers
- singleflight:  at most one run of a slow read at a time (the probe, the fleet read)
- resetschedule: the probe at a window's reset
- latch:         the durable edge latch: one account.status.changed per edge
"""
