"""Steering the work (docs/steering.md): which account to use, and moving to it.

One job per module, nothing imported here:

- advice:    one advice for every surface: stay, wait, switch or none (pure)
- advisor:   the advice beside each vendor's posture, computed once per probe
- headroom:  the guard's decision and the switch's choice under the reserve (pure)
- switching: a switch of the active account as one transaction
- watcher:   the monitor's side: it notices a switch, and switches by itself when asked to
"""
