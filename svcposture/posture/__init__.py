"""The posture service (docs/posture.md): one per registered vendor, over the probe.

One job per module, nothing imported here:

- service:       cache, single flight, the periodic probe and its subscribers
- vendorservice: another vendor's posture on the same schedule
- resetschedule: the probe at a window's reset
- latch:         the durable edge latch: one account.status.changed per edge
"""
