"""What the child scrubs of its rows: any string from outside that carries a piece of a secret.

A vendor's reply may echo what it was sent (a name, a plan word), and a
hostile one may spread a token over several strings, each padded so that
it is no part of the token and holds none. A string sharing MIN_SECRET_PART
or more consecutive characters with any secret the child holds is dropped
by the vendor's sweep before its row is printed; the runs are built once
per row from every vendor's secrets.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, Tuple

# A string sharing this many consecutive characters with a secret is taken to carry a piece of it;
# fewer is too short to be of use to anyone and too common to drop (a 7-character window name).
MIN_SECRET_PART = 8


def secret_runs(secrets: Iterable[str]) -> "frozenset[str]":
    """Every run of MIN_SECRET_PART consecutive characters of every secret."""
    n = MIN_SECRET_PART
    return frozenset(s[i:i + n] for s in secrets if isinstance(s, str) for i in range(len(s) - n + 1))


def shares_a_run(text: Any, runs: "frozenset[str]") -> bool:
    """True when `text` holds MIN_SECRET_PART or more consecutive characters of a secret."""
    n = MIN_SECRET_PART
    return isinstance(text, str) and any(text[i:i + n] in runs for i in range(len(text) - n + 1))


def scrub_row(row: Dict[str, Any], secrets: Iterable[str],
              window_lists: Tuple[str, ...] = ("extraWindows",)) -> "frozenset[str]":
    """Drop the strings a reply put into `row` that share a run of a secret: its `planType` and
    the `name` of every window in `window_lists`. Returns the runs, for the vendor's own fields."""
    runs = secret_runs(secrets)
    if shares_a_run(row.get("planType"), runs):
        row["planType"] = None
    for key in window_lists:
        for window in row.get(key) or ():
            if isinstance(window, dict) and shares_a_run(window.get("name"), runs):
                window["name"] = None
    return runs
