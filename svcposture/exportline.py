"""The accounts env file's export line: which account is active, and rewriting it (docs/steering.md).

The active account is chosen by one line of the file,
`export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_<NAME>"` for Claude or
`export CODEX_HOME="$CODEX_HOME_<NAME>"` for Codex. A switch rewrites only the
value of that line; every other byte (comments, blank lines, CRLF, trailing
spaces, other variables) is kept. The line refers to the account's variable,
so no token value is ever copied into the output.

The functions over bytes are pure. `read_env_file` and `replace_env_file` are
the edge: no symlink followed, a 0600 temporary file in the same directory,
fsync, the file's own mode, and a refusal when the file changed between the
read and the rename.
"""
from __future__ import annotations

import errno
import os
import re
import stat
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

from .errors import SvcpostureError

CLAUDE = "claude"
CODEX = "codex"
PROVIDERS = (CLAUDE, CODEX)
PLACEHOLDER = b"PASTE_TOKEN_HERE"
# The same limit the probe child puts on the file it sources.
MAX_ENV_BYTES = 1024 * 1024


class Vendor(NamedTuple):
    export_var: bytes     # the variable the export line sets
    entry_prefix: bytes   # each account's variable is this prefix plus its NAME
    label_prefix: str     # label = label_prefix + NAME in lower case


VENDORS = {
    CLAUDE: Vendor(b"MODEL_CODE_OAUTH_TOKEN", b"MODEL_TOKEN_", ""),
    CODEX: Vendor(b"CODEX_HOME", b"CODEX_HOME_", "codex-"),
}

_NAME = rb"[A-Za-z0-9_]+"
_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_LEAD_RE = re.compile(rb"[ \t]*(?:export[ \t]+)?\Z")


def _assignments(data: bytes, var: bytes, named: bool) -> "Iterator[Tuple[bytes, int]]":
    """(NAME, value start) of each line assigning `var` (`var` + NAME when `named`),
    `[export ]VAR=` at the start of a line after blanks, in file order.

    A literal search, then a look at the line around each hit: on a 1 MB file
    of comments this is a memchr-speed scan, where a `^...` regex would try
    every byte."""
    pos = 0
    while True:
        hit = data.find(var, pos)
        if hit < 0:
            return
        pos = hit + len(var)
        line_start = data.rfind(b"\n", 0, hit) + 1
        if not _LEAD_RE.match(data, line_start, hit):
            continue
        end = pos
        if named:
            while end < len(data) and data[end] in _NAME_BYTES:
                end += 1
            if end == pos:
                continue
        if data[end:end + 1] != b"=":
            continue
        yield data[pos:end], end + 1


class SwitchError(SvcpostureError):
    """The switch cannot be made; the file is untouched. `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class FileChangedError(SwitchError):
    """The file changed between the read and the rename; nothing was replaced."""


class Entry(NamedTuple):
    label: str
    name: str      # the NAME part of the variable, as the file spells it
    usable: bool   # a value that is neither empty nor the placeholder


def _value_end(line: bytes, start: int) -> int:
    """Where the shell word starting at `start` ends: at the first unquoted blank, CR or `;`."""
    quote = 0
    i = start
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == 0x5C and quote == 0x22:  # backslash inside double quotes
                i += 2
                continue
            if ch == quote:
                quote = 0
        elif ch == 0x5C:
            i += 2
            continue
        elif ch in (0x22, 0x27):
            quote = ch
        elif ch in (0x20, 0x09, 0x0D, 0x3B):
            break
        i += 1
    return min(i, len(line))


def _unquoted(value: bytes) -> bytes:
    if len(value) >= 2 and value[:1] == value[-1:] and value[:1] in (b'"', b"'"):
        return value[1:-1]
    return value


def _line_end(data: bytes, start: int) -> int:
    end = data.find(b"\n", start)
    return len(data) if end < 0 else end


def _value_at(data: bytes, start: int) -> Tuple[int, int]:
    """(start, end) of the shell word starting at `start`, within its line."""
    line_end = _line_end(data, start)
    return start, start + _value_end(data[start:line_end], 0)


def entries(data: bytes, provider: str) -> List[Entry]:
    """The vendor's account lines in file order (a NAME defined twice counts once, its last value)."""
    vendor = VENDORS[provider]
    found: Dict[str, Entry] = {}
    order: List[str] = []
    for raw_name, value_start in _assignments(data, vendor.entry_prefix, named=True):
        name = raw_name.decode("ascii")
        start, end = _value_at(data, value_start)
        value = _unquoted(data[start:end]).strip()
        label = vendor.label_prefix + name.lower()
        if label not in found:
            order.append(label)
        found[label] = Entry(label, name, bool(value) and value != PLACEHOLDER)
    return [found[label] for label in order]


def _last_export(data: bytes, vendor: Vendor) -> Optional[int]:
    """Where the value of the last export line starts, else None."""
    last = None
    for _name, last in _assignments(data, vendor.export_var, named=False):
        pass
    return last


def active_label(data: bytes, provider: str) -> Optional[str]:
    """The label the last export line refers to (`"$PREFIX<NAME>"`, `$PREFIX<NAME>`,
    `${PREFIX<NAME>}`), else None: no line, or a value that names no account variable."""
    vendor = VENDORS[provider]
    at = _last_export(data, vendor)
    if at is None:
        return None
    start, end = _value_at(data, at)
    value = _unquoted(data[start:end])
    ref = re.match(rb"^\$\{?" + re.escape(vendor.entry_prefix) + b"(" + _NAME + rb")\}?$", value)
    if ref is None or (value[1:2] == b"{") != value.endswith(b"}"):
        return None
    return vendor.label_prefix + ref.group(1).decode("ascii").lower()


def rewrite_export(data: bytes, provider: str, name: str) -> bytes:
    """`data` with the last export line's value replaced by `"$PREFIX<name>"`.

    Only the value's bytes change: what precedes it (indentation, `export`),
    and what follows it (trailing spaces, a comment, the CR of a CRLF line)
    stay. Without an export line, one is appended, ending as the file's lines
    do (CRLF when the file uses it).
    """
    vendor = VENDORS[provider]
    if not re.match(b"^" + _NAME + b"$", name.encode("ascii", "replace")):
        raise ValueError("not an account variable name: %r" % (name,))
    value = b'"$' + vendor.entry_prefix + name.encode("ascii") + b'"'
    at = _last_export(data, vendor)
    if at is not None:
        start, end = _value_at(data, at)
        return data[:start] + value + data[end:]
    newline = b"\r\n" if b"\r\n" in data else b"\n"
    separator = b"" if not data or data.endswith(b"\n") else newline
    return data + separator + b"export " + vendor.export_var + b"=" + value + newline


# ---------------------------------------------------------------- the file

class Snapshot(NamedTuple):
    data: bytes
    key: Tuple[int, int, int, int]  # (st_dev, st_ino, st_size, st_mtime_ns)
    mode: int


def _stat_key(st: os.stat_result) -> Tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def read_env_file(path: str) -> Snapshot:
    """The file's bytes, identity and mode; SwitchError for a symlink, a non-regular
    file, a missing or unreadable file, or one larger than 1 MiB."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SwitchError("%s is a symbolic link; refusing to follow it" % path) from None
        raise SwitchError("%s: cannot open: %s" % (path, exc.strerror or exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SwitchError("%s is not a regular file" % path)
        if st.st_size > MAX_ENV_BYTES:
            raise SwitchError("%s is larger than %d bytes; not an accounts file" % (path, MAX_ENV_BYTES))
        chunks: List[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_ENV_BYTES:
                raise SwitchError("%s grew past %d bytes while being read" % (path, MAX_ENV_BYTES))
            chunks.append(chunk)
    finally:
        os.close(fd)
    return Snapshot(b"".join(chunks), _stat_key(st), stat.S_IMODE(st.st_mode))


def _unchanged(path: str, before: Snapshot) -> bool:
    try:
        now = read_env_file(path)
    except SwitchError:
        return False
    return now.key == before.key and now.data == before.data


def replace_env_file(path: str, before: Snapshot, data: bytes,
                     before_rename: Optional[Callable[[], None]] = None) -> None:
    """Atomically put `data` at `path`, unless the file is no longer `before`.

    A temporary file created 0600 in the same directory is written, fsynced and
    given the file's own mode; then the file is read again, and only when its
    identity (device, inode, size, mtime) and bytes are still those of `before`
    is the temporary renamed over it (FileChangedError otherwise, with the
    temporary removed). The switch command holds its lock throughout, so two
    switches never interleave; the check catches an editor or a script.
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, ".%s.%s.tmp" % (os.path.basename(path), os.urandom(6).hex()))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
            os.fchmod(fd, before.mode)
        finally:
            os.close(fd)
        if before_rename is not None:
            before_rename()
        if not _unchanged(path, before):
            raise FileChangedError("%s changed while the switch was being written; nothing replaced, "
                                   "run it again" % path)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: str) -> None:
    """Make the rename durable; a filesystem that refuses fsync on a directory still renamed atomically."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
