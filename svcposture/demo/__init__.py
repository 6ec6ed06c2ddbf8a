"""`svc-monitor demo`: a simulated provider, a throw-away node home and the real monitor (docs/first-look.md).

- main:          the demo process (home, simulated provider, the monitor against them)
- fleet:         the simulated fleet the demo's `/fleet` page shows
- provider_wire: the provider's headers and bodies as the simulated provider sends them
"""
