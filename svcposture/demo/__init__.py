"""`svc-monitor demo`: a simulated provider, a throw-away node home and the real monitor (docs/first-look.md).

- main:     the demo process (home, simulated provider, the monitor against them), driving the demo
            part of every registered vendor (docs/vendors.md)
- timeline: the simulated stories the demo accounts follow
- fleet:    the simulated fleet the demo's `/fleet` page shows
"""
