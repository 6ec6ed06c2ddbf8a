"""A node's first run (docs/first-look.md): setting it up, and saying what is missing.

One job per module, nothing imported here:

- init:  `svc-monitor init`: what a fresh machine needs, never overwriting anything
- notes: the monitor's start-up notes on what a first run gets wrong
"""
