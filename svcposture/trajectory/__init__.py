"""Where each account is heading (docs/trajectory.md): history, forecasts, alerts.

One job per module, nothing imported here but the pure forecast, which the
package's face hands on:

- service:      the service behind /api/trajectory, fed by every fresh probe result
- history:      the day files of window percentages
- historyindex: the monitor's in-memory index of them, behind /api/history
- forecast:     when a window hits its wall (pure)
- cycle:        which reset cycle a value belongs to
- alerts:       threshold, forecast, wall and usable alerts, exactly once
- notify:       the operator's notify hook
- hookcage:     every process a hook starts, found again
"""
