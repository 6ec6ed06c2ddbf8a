"""Whether a request's body framing can be trusted (RFC 9112 §6.3).

The monitor reads no request body, but it must know where a request ends:
a body it misjudges is read as the next request on the connection, which a
proxy in front of it would not see (request smuggling). So a request whose
framing is ambiguous gets 400 and its connection closed, never an answer.
"""
from __future__ import annotations

from typing import Iterable, Optional


def framing_error(content_lengths: Iterable[str], transfer_encoding: bool) -> Optional[str]:
    """Why the framing of a request with these Content-Length field values (and
    a Transfer-Encoding field, or not) cannot be trusted; None when it can.

    - Content-Length together with Transfer-Encoding: which one a peer obeys
      differs from one implementation to the next;
    - a value that is not a plain decimal number (`+5`, `-1`, `0x10`, empty):
      a lenient parser elsewhere reads a length this one does not;
    - fields (or list members, `5, 0`) that differ. Identical ones are one
      length, as RFC 9112 allows.
    """
    lengths = set()
    seen = False
    for field in content_lengths:
        seen = True
        for member in field.split(","):
            member = member.strip(" \t")
            if not (member.isdigit() and member.isascii()):
                return "Content-Length must be a decimal number."
            lengths.add(int(member))
    if not seen:
        return None
    if transfer_encoding:
        return "Content-Length and Transfer-Encoding together."
    if len(lengths) > 1:
        return "Content-Length fields differ."
    return None
