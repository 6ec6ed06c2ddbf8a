"""The bearer token file (`~/.config/svc/metrics-token`): its rules, its digest, and a new one.

A listener off the loopback answers only a client that sends this file's
token (`Authorization: Bearer <token>`). The monitor reads the file once, at
start-up, and keeps the token's SHA-256 alone: a changed file counts from the
next start. Prometheus reads the same token from the file its scrape job
names (`authorization.credentials_file`), one per job, so one token serves a
fleet: every node's file holds the same line.

The rules, each refusal one sentence that names the file and the fix:

- the file is opened without following a symbolic link and without blocking
  (a FIFO planted there cannot stall the monitor), and every check is made on
  that open descriptor, from which the token is then read: swapping the file
  between a check and the read changes nothing;
- it is a regular file owned by this user, with no permission for group or
  others (0600 or 0400), in a directory no other user can change;
- it holds one line of at most 4,096 bytes: the token and an optional LF or
  CR LF (Prometheus trims both from its own copy, so a file written on
  Windows works on both sides);
- the token is 16 to 4,096 characters of RFC 6750's b64token (A-Z a-z 0-9
  - . _ ~ + / and trailing =), which an HTTP header carries as they are.

Nothing here prints, logs or returns the token; a refusal never quotes the file.
"""
from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from typing import Optional

from .._dirs import UnsafePathError, unsafe_dir_reason
from .._files import PathLike, create_new_atomic, open_nofollow
from ..errors import SvcpostureError

__all__ = ["MAX_TOKEN_BYTES", "MIN_TOKEN_CHARS", "TokenFileError", "create_token_file", "load_token_digest",
           "token_digest", "token_file_problem"]

MAX_TOKEN_BYTES = 4096
# Fewer characters than this are guessable by whoever can reach the port and try.
MIN_TOKEN_CHARS = 16
# The bytes of randomness in a token init makes: 256 bits, 43 characters of URL-safe base64.
NEW_TOKEN_BYTES = 32
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*\Z")
MAKE_ONE = "`svc-monitor init --metrics-token` makes one"


class TokenFileError(SvcpostureError):
    """The token file breaks a rule; the message is one sentence naming the file and the fix."""


def token_digest(token: str) -> bytes:
    """The SHA-256 of a token as a client sends it: what the monitor keeps and compares."""
    return hashlib.sha256(token.encode("iso-8859-1", "replace")).digest()


def load_token_digest(path: PathLike) -> bytes:
    """The SHA-256 of the token in `path`, read by the rules above; TokenFileError otherwise."""
    shown = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(shown))
    unsafe = unsafe_dir_reason(directory) if os.path.isdir(directory) else None
    if unsafe:
        raise TokenFileError("the metrics token file %s is in a directory another user can change (%s)"
                             % (shown, unsafe))
    fd = _open(shown)
    try:
        _check_descriptor(fd, shown)
        data = _read_at_most(fd, MAX_TOKEN_BYTES + 1)
    finally:
        os.close(fd)
    return token_digest(_token_of(data, shown))


def token_file_problem(path: PathLike) -> Optional[str]:
    """Why the monitor would refuse the token file at `path` (one sentence), or None when it is good."""
    try:
        load_token_digest(path)
    except TokenFileError as exc:
        return str(exc)
    return None


def create_token_file(path: PathLike) -> bool:
    """Write a new random token to `path` (mode 0600, its directory made 0700) unless something
    is there already, a link included; True when written. The token is never returned."""
    import secrets

    return create_new_atomic(path, (secrets.token_urlsafe(NEW_TOKEN_BYTES) + "\n").encode("ascii"), 0o600)


def _open(shown: str) -> int:
    try:
        return open_nofollow(shown, os.O_RDONLY)
    except FileNotFoundError:
        raise TokenFileError("the metrics token file %s does not exist: create it with `svc-monitor init "
                             "--metrics-token`, or copy the fleet's token file there with mode 0600" % shown) from None
    except UnsafePathError:
        if os.path.islink(shown):
            raise TokenFileError("the metrics token file %s is a symbolic link, which is refused for a secret: "
                                 "put the file itself there, mode 0600" % shown) from None
        raise TokenFileError("the metrics token file %s is not a regular file: replace it with a file holding "
                             "one token line; %s" % (shown, MAKE_ONE)) from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO no one writes to, opened without blocking
            raise TokenFileError("the metrics token file %s is not a regular file: replace it with a file "
                                 "holding one token line; %s" % (shown, MAKE_ONE)) from None
        raise TokenFileError("the metrics token file %s cannot be read (%s): make it a file of this user's, "
                             "mode 0600" % (shown, exc.strerror or exc)) from None


def _check_descriptor(fd: int, shown: str) -> None:
    """Owner and mode, judged on the open descriptor the token is then read from."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise TokenFileError("the metrics token file %s is not a regular file: replace it with a file holding "
                             "one token line; %s" % (shown, MAKE_ONE))
    if info.st_uid != os.geteuid():
        raise TokenFileError("the metrics token file %s is owned by uid %d, not by this user (uid %d): replace "
                             "it with a file of this user's, mode 0600" % (shown, info.st_uid, os.geteuid()))
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise TokenFileError("the metrics token file %s has mode %04o, so group or others can reach it: run "
                             "`chmod 600 %s`" % (shown, mode, shown))


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks = []
    size = 0
    while size < limit:
        chunk = os.read(fd, limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _token_of(data: bytes, shown: str) -> str:
    """The token a file's bytes hold: one line, an optional LF or CR LF after it."""
    if len(data) > MAX_TOKEN_BYTES:
        raise TokenFileError("the metrics token file %s is longer than %d bytes, so it holds no token: replace "
                             "it with one token line; %s" % (shown, MAX_TOKEN_BYTES, MAKE_ONE))
    for ending in (b"\r\n", b"\n"):
        if data.endswith(ending):
            data = data[:-len(ending)]
            break
    if not data:
        raise TokenFileError("the metrics token file %s is empty: remove it and run `svc-monitor init "
                             "--metrics-token`, or write the fleet's token into it" % shown)
    if b"\n" in data:
        raise TokenFileError("the metrics token file %s holds more than one line: leave the token alone on "
                             "its one line" % shown)
    text = data.decode("iso-8859-1")
    if not _B64TOKEN.match(text):
        raise TokenFileError("the metrics token file %s holds characters a bearer token cannot carry (only "
                             "A-Z a-z 0-9 - . _ ~ + / and a trailing =): write a new token there; %s"
                             % (shown, MAKE_ONE))
    if len(text) < MIN_TOKEN_CHARS:
        raise TokenFileError("the metrics token file %s holds a token of %d characters, fewer than %d: write a "
                             "longer one there; %s" % (shown, len(text), MIN_TOKEN_CHARS, MAKE_ONE))
    return text
