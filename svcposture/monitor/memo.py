"""Memo: one value and the key it was built for, the one cache of the monitor's bytes.

Each of the monitor's caches (the posture body's JSON, the cached reads of
/api/accounts for each vendor, /api/trajectory, /api/login) keeps the value
built for the newest key: a key names everything the value depends on (a
summary object and the millisecond, a trajectory body, a sample), so a stale
value is never served and there is nothing to expire.

The key and the value are one tuple, replaced by one assignment: a reader on
another thread sees the old pair or the new one, never half of each, and no
lock is taken on the hot path. Two threads that miss at once both build; the
values are equal, so either may stay.
"""
from __future__ import annotations

from typing import Any, Callable, Generic, Tuple, TypeVar

T = TypeVar("T")

_NOTHING = object()


class Memo(Generic[T]):
    """The value `build(*args)` made for the newest `key`.

    A key is a tuple compared with ==, so it may hold the objects it depends on
    (tuple comparison tries identity first, so the same object costs one
    pointer comparison); holding them, rather than their id(), means a freed
    object's id reused by a new one can never match.
    """

    __slots__ = ("_pair",)

    def __init__(self) -> None:
        self._pair: Tuple[Any, Any] = (_NOTHING, None)

    def get(self, key: Any, build: Callable[..., T], *args: Any) -> T:
        pair = self._pair
        if pair[0] == key:
            return pair[1]  # type: ignore[no-any-return]
        value = build(*args)
        self._pair = (key, value)
        return value

    def clear(self) -> None:
        self._pair = (_NOTHING, None)
