"""A Codex login's auth.json, read the careful way (the child only: it holds the tokens).

`codex login` writes `$CODEX_HOME/auth.json` with mode 0600:
`{"OPENAI_API_KEY": null, "tokens": {"id_token", "access_token", "refresh_token",
"account_id"}, "last_refresh"}`. Only `tokens.access_token` and
`tokens.account_id` are taken; the refresh token is never used, since a
refresh rotates it and logs the user's own `codex` CLI out.

The file is opened once without following a symlink, and that descriptor is
judged (regular file, this user's, owner-only mode, at most 64 KB) before a
byte is read: a file swapped between a check and a read cannot slip through.
"""
from __future__ import annotations

import errno
import os
import stat
from typing import Any, Dict, Optional, Tuple, Union

from .._text import has_control, loads_bounded
from .errors import config_error, fix_text

AUTH_FILE = "auth.json"
MAX_AUTH_BYTES = 64 * 1024
# A bearer token longer than this, or with a space or control in it, would not be a header value.
MAX_TOKEN_CHARS = 16 * 1024
MAX_ACCOUNT_ID_CHARS = 256

Credentials = Tuple[str, Optional[str]]


def _open(directory: str) -> Union[int, Dict[str, Any]]:
    if not os.path.isabs(directory):
        return config_error("not_absolute", fix_text("absolute", directory))
    if not os.path.isdir(directory):
        return config_error("no_directory", fix_text("mkdir", directory))
    path = os.path.join(directory, AUTH_FILE)
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return config_error("no_auth_file", fix_text("login", directory))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return config_error("symlink", fix_text("link", directory))
        return config_error("unreadable")


def _judge(fd: int, directory: str) -> Optional[Dict[str, Any]]:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        return config_error("not_regular_file", fix_text("login", directory))
    if st.st_uid != os.geteuid():
        return config_error("foreign_owner", fix_text("login", directory))
    if st.st_mode & 0o077:
        return config_error("loose_mode", fix_text("chmod", directory))
    if st.st_size > MAX_AUTH_BYTES:
        return config_error("too_large", fix_text("login", directory))
    return None


def _header_value(value: Any, limit: int) -> Optional[str]:
    if not isinstance(value, str):
        return None
    value = value.strip()
    if not value or len(value) > limit or has_control(value) or " " in value:
        return None
    return value


def credentials_from(body: Any, directory: str) -> Union[Credentials, Dict[str, Any]]:
    """(access token, account id or None) from auth.json's parsed body, or a config error."""
    if not isinstance(body, dict):
        return config_error("bad_shape", fix_text("login", directory))
    tokens = body.get("tokens")
    token = _header_value(tokens.get("access_token"), MAX_TOKEN_CHARS) if isinstance(tokens, dict) else None
    if token is None:
        api_key = body.get("OPENAI_API_KEY")
        if isinstance(api_key, str) and api_key.strip():
            return config_error("api_key_only", fix_text("login", directory))
        return config_error("bad_shape", fix_text("login", directory))
    assert isinstance(tokens, dict)
    return token, _header_value(tokens.get("account_id"), MAX_ACCOUNT_ID_CHARS)


def read_credentials(directory: str) -> Union[Credentials, Dict[str, Any]]:
    """The login's (access token, account id) or a config error in the Codex vocabulary."""
    opened = _open(directory)
    if isinstance(opened, dict):
        return opened
    try:
        problem = _judge(opened, directory)
        if problem is not None:
            return problem
        os.set_blocking(opened, True)
        raw = os.read(opened, MAX_AUTH_BYTES + 1)
    except OSError:
        return config_error("unreadable")
    finally:
        os.close(opened)
    try:
        body = loads_bounded(raw, MAX_AUTH_BYTES)
    except ValueError:
        return config_error("bad_shape", fix_text("login", directory))
    return credentials_from(body, directory)
