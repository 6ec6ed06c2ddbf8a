"""The words of the posture vocabulary, declared once.

A window has two spellings because two worlds meet here: the provider, the
event log and `bindingWindow` say `five_hour`/`seven_day` (the provider's own
claim names, kept verbatim in the contract's events), while the JSON bodies
say `fiveHour`/`sevenDay` (camelCase like every other body field). Tuples are
ordered: where a rule breaks a tie "to five_hour" it means the first one.
"""
from __future__ import annotations

FIVE_HOUR = "five_hour"
SEVEN_DAY = "seven_day"
WINDOW_CLAIMS = (FIVE_HOUR, SEVEN_DAY)
WINDOW_FIELDS = ("fiveHour", "sevenDay")
FIELD_OF_CLAIM = dict(zip(WINDOW_CLAIMS, WINDOW_FIELDS))
CLAIM_OF_FIELD = dict(zip(WINDOW_FIELDS, WINDOW_CLAIMS))

# What the provider says about one window, least severe first.
ALLOWED = "allowed"
ALLOWED_WARNING = "allowed_warning"
REJECTED = "rejected"
WINDOW_STATUSES = (ALLOWED, ALLOWED_WARNING, REJECTED)
# Severity for "the window with the worst status"; anything unknown ranks 0.
STATUS_RANK = {status: rank for rank, status in enumerate(WINDOW_STATUSES, start=1)}

# What the node reports (`status` of the posture body).
OK = "ok"
DEGRADED = "degraded"
ERROR = "error"
UNKNOWN = "unknown"
NODE_STATUSES = (OK, DEGRADED, REJECTED, ERROR, UNKNOWN)
# The binding window's status as a node status; anything else is `unknown`.
NODE_STATUS_OF = {ALLOWED: OK, ALLOWED_WARNING: DEGRADED, REJECTED: REJECTED}

# The two values of `account.status` in account.status.changed: the edges the
# latch moves on. Every other node status holds the latch.
EDGE_STATUSES = (REJECTED, OK)

# An account's health (docs/posture.md, "Health"): whether its figures may be trusted, beside them.
# `ok`: the last reading is good and fresh; `refused`: the provider refused the credential;
# `limited`: the reader was rate-limited; `unreachable`: the provider could not be reached;
# `stale`: the figures shown are not the newest reading's; `unread`: no good reading yet.
HEALTH_OK = "ok"
REFUSED = "refused"
LIMITED = "limited"
UNREACHABLE = "unreachable"
STALE = "stale"
UNREAD = "unread"
HEALTHS = (HEALTH_OK, REFUSED, LIMITED, UNREACHABLE, STALE, UNREAD)
# What a vendor's `error_health` may name; any other error's health follows from the figures kept.
ERROR_HEALTHS = (REFUSED, LIMITED, UNREACHABLE)
# A good reading older than this many probe intervals is stale.
STALE_INTERVALS = 3
