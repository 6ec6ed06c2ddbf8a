"""An account's key: one name for one provider account on every host (docs/fleet.md).

Hosts label their accounts as they like (`acct1` here, `work` there), so the
fleet tells accounts apart by the login instead: the key is the first 16 hex
digits of SHA-256 over `provider + "\\0" + lower-cased email`. It names the
account without showing the address. An account whose email is unknown has
no key (None): nothing says whether two hosts' entries are the same account,
so the fleet shows it by host and label only.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any, Optional

KEY_RE = re.compile(r"^[0-9a-f]{16}$")
KEY_DIGITS = 16


def account_key(provider: Any, email: Any) -> Optional[str]:
    """The key of `provider`'s account logged in as `email`; None without both (non-empty text)."""
    if not isinstance(provider, str) or not provider or not isinstance(email, str) or not email:
        return None
    digest = hashlib.sha256((provider + "\0" + email.lower()).encode("utf-8")).hexdigest()
    return digest[:KEY_DIGITS]


def valid_key(value: Any) -> bool:
    """Whether `value` has a key's shape (16 lower-case hex digits)."""
    return isinstance(value, str) and KEY_RE.fullmatch(value) is not None
