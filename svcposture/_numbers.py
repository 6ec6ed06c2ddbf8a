"""What counts as a number in JSON the package reads: one rule for every reader.

`True` is an `int` to Python but never a number to JSON, so every check here
refuses booleans. Nothing but `math` is imported: the status line uses this
on every render.
"""
from __future__ import annotations

import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional, Union


def is_number(value: Any) -> bool:
    """An int or a float, not a bool (NaN and infinities included)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_int(value: Any) -> bool:
    """An int, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def finite_number(value: Any) -> Optional[Union[int, float]]:
    """`value` itself when it is a finite number, else None.

    An integer too large for a float (hundreds of digits, from a hostile
    document) is not finite here rather than an OverflowError.
    """
    if not is_number(value):
        return None
    try:
        return value if math.isfinite(value) else None
    except OverflowError:
        return None
