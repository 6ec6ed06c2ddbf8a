"""The accounts env file's export line: which account is active, and rewriting it (docs/steering.md).

The active account is chosen by one line of the file, each vendor's own
(its `lines.export_line`, docs/vendors.md): `export MODEL_CODE_OAUTH_TOKEN="$MODEL_TOKEN_<NAME>"`
for Claude, `export CODEX_HOME="$CODEX_HOME_<NAME>"` for Codex. A switch rewrites only the
value of that line; every other byte (comments, blank lines, CRLF, trailing
spaces, other variables) is kept. The line refers to the account's variable,
so no token value is ever copied into the output.

The value is one shell word, read as the shell reads it (quotes, `$( )`,
backquotes and `${ }` nest); one that is not closed on its line is refused,
never cut short. `refusal` names what in the text would keep the shell from
ending with the account the switch writes, and `shell_problem` runs `sh -n`
over the rewritten file before it is renamed into place.

The functions over bytes are pure. `read_env_file` and `replace_env_file` are
the edge: no symlink followed, the atomic write of _files (a 0600 temporary
file in the same directory, fsync, rename), the file's own mode, and a refusal
when the file changed between the read and the rename.
"""
from __future__ import annotations

import errno
import os
import re
import stat
import subprocess
from pathlib import Path
from typing import IO, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

from .._files import write_bytes_atomic
from .entries import MAX_ENV_FILE_BYTES
from .lint import UNQUOTED_BLANK, line_problems, sentence
from ..errors import SvcpostureError
from .shellword import InvalidShellWordError, code_part, syntax_error_line, unquoted, word_end

# The same limit the probe child puts on the file it sources.
MAX_ENV_BYTES = MAX_ENV_FILE_BYTES


class Lines(NamedTuple):
    """A vendor's env lines (vendor.EnvLines) as the bytes this module matches."""

    export_var: bytes     # the variable the export line sets
    entry_prefix: bytes   # each account's variable is this prefix plus its NAME
    label_prefix: str     # label = label_prefix + NAME in lower case
    placeholders: Tuple[bytes, ...]  # values that are not filled in


def _lines_of(provider: str) -> Lines:
    from ..vendors import vendor_named

    vendor = vendor_named(provider)
    if vendor is None:
        raise SwitchError("no vendor named %s is registered" % provider, 2)
    lines = vendor.lines
    return Lines(lines.active_var.encode("ascii"), lines.entry_prefix.encode("ascii"), lines.label_prefix,
                 tuple(p.encode("utf-8") for p in lines.placeholders))

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


def _unquoted(value: bytes) -> bytes:
    if len(value) >= 2 and value[:1] == value[-1:] and value[:1] in (b'"', b"'"):
        return value[1:-1]
    return value


def _line_end(data: bytes, start: int) -> int:
    end = data.find(b"\n", start)
    return len(data) if end < 0 else end


def _value_at(data: bytes, start: int) -> Tuple[int, int]:
    """(start, end) of the shell word starting at `start`, within its line; quotes, `$( )`,
    backquotes and `${ }` nest (shellword). InvalidShellWordError when one is not closed on the line."""
    line_end = _line_end(data, start)
    return start, start + word_end(data[start:line_end].decode("latin-1"))


def _line_number(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def entries(data: bytes, provider: str) -> List[Entry]:
    """The vendor's account lines in file order (a NAME defined twice counts once, its last value)."""
    vendor = _lines_of(provider)
    found: Dict[str, Entry] = {}
    order: List[str] = []
    for raw_name, value_start in _assignments(data, vendor.entry_prefix, named=True):
        name = raw_name.decode("ascii")
        try:
            start, end = _value_at(data, value_start)
        except InvalidShellWordError:
            start = end = value_start  # a value the shell would not take as written: not usable
        value = _unquoted(data[start:end]).strip()
        label = vendor.label_prefix + name.lower()
        if label not in found:
            order.append(label)
        found[label] = Entry(label, name, bool(value) and value not in vendor.placeholders)
    return [found[label] for label in order]


def _last_export(data: bytes, vendor: Lines) -> Optional[int]:
    """Where the value of the last export line starts, else None."""
    last = None
    for _name, last in _assignments(data, vendor.export_var, named=False):
        pass
    return last


def active_label(data: bytes, provider: str) -> Optional[str]:
    """The label the last export line refers to (`"$PREFIX<NAME>"`, `$PREFIX<NAME>`,
    `${PREFIX<NAME>}`), else None: no line, or a value that names no account variable."""
    vendor = _lines_of(provider)
    at = _last_export(data, vendor)
    if at is None:
        return None
    try:
        start, end = _value_at(data, at)
    except InvalidShellWordError:
        return None
    if data[start:start + 1] == b"'":
        return None  # single quotes keep `$NAME` as text: the shell sets no account's value
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
    vendor = _lines_of(provider)
    if not re.match(b"^" + _NAME + b"$", name.encode("ascii", "replace")):
        raise ValueError("not an account variable name: %r" % (name,))
    value = b'"$' + vendor.entry_prefix + name.encode("ascii") + b'"'
    at = _last_export(data, vendor)
    if at is not None:
        try:
            start, end = _value_at(data, at)
        except InvalidShellWordError as exc:
            raise SwitchError("line %d: %s, so the switch cannot tell where the value of %s ends; "
                              "nothing written: fix the line" % (_line_number(data, at), exc,
                                                                 vendor.export_var.decode())) from None
        return data[:start] + value + data[end:]
    newline = b"\r\n" if b"\r\n" in data else b"\n"
    separator = b"" if not data or data.endswith(b"\n") else newline
    return data + separator + b"export " + vendor.export_var + b"=" + value + newline


def _first_definition(data: bytes, vendor: Lines, label: str) -> Optional[int]:
    for raw_name, value_start in _assignments(data, vendor.entry_prefix, named=True):
        if vendor.label_prefix + raw_name.decode("ascii").lower() == label:
            return value_start
    return None


def _lines_naming(data: bytes, needle: bytes, start: int = 0) -> "Iterator[Tuple[int, int]]":
    """(line start, hit) of each line from `start` on that holds `needle`, once per line: a
    literal search, so a megabyte of comments costs a memchr-speed scan."""
    pos, last_line = start, -1
    while True:
        hit = data.find(needle, pos)
        if hit < 0:
            return
        pos = hit + len(needle)
        line_start = data.rfind(b"\n", 0, hit) + 1
        if line_start != last_line:
            last_line = line_start
            yield line_start, hit


def _later_assignment(data: bytes, vendor: Lines, after: int) -> Optional[int]:
    """The line of the first assignment or unset of the export variable after offset `after`
    that is not in a comment line, else None."""
    var = vendor.export_var
    for line_start, _hit in _lines_naming(data, var, _line_end(data, after)):
        line = data[line_start:_line_end(data, line_start)]
        if line.lstrip().startswith(b"#"):
            continue
        if re.search(rb"(?<![A-Za-z0-9_])" + var + rb"=|\bunset[ \t]+(?:-v[ \t]+)?" + var + rb"\b", line):
            return _line_number(data, line_start)
    return None


# ---------------------------------------------------------------- what the rewrite can own
#
# The switch rewrites one value and then proves, by sourcing the result in a token-scoped child,
# that the shell ends with the account it wrote (switching.py). The text is refused first, naming
# the line, wherever another line could decide instead: a second assignment on the export line
# (`export V="$A1"; V="$A1"`, `export V="$A1" V="$A1"`), an export line the shell may not run
# (inside a function, a loop, an `if`, a subshell, or continued from the line above), another
# line that names the variable as something to set (`V=`, `read V`, `unset V`, `${V:=x}`, a
# function body), and a line that sources another file or evaluates text (`.`, `source`, `eval`).

# What may follow the export line's value: blanks, a comment, the CR of a CRLF line.
_EXPORT_TAIL_RE = re.compile(rb"[ \t]*(?:#[^\n]*)?\r?\Z")
# Where a word starts: what may stand before a name that is set (`V=`, `read V`, `"V=x"`).
_WORD_STARTS = frozenset(" \t;&|(){}!`\"'")
# After `${V`: a read of the value, unless an assignment (`${V=x}`, `${V:=x}`) follows.
_EXPANSION_READS = frozenset("}:-+?#%")
# A command that sources a file or evaluates text, where a command may start (quotes blanked).
_RUNS_TEXT_RE = re.compile(r"(?:^|[;&|(){}!`]|\b(?:then|do|else|elif|if|while|until)\b)[ \t]*"
                           r"(?:[A-Za-z_][A-Za-z0-9_]*=[^ \t;&|]*[ \t]+)*(?:(?:command|builtin)[ \t]+)?"
                           r"(\.|source|eval)(?=[ \t;&|)]|$)")
_RUNS_TEXT_BYTES_RE = re.compile(_RUNS_TEXT_RE.pattern.encode("ascii"))


def _sets_name(code: str, var: str) -> bool:
    """Whether a line's code names `var` as something to set: at the start of a word (an
    assignment, an argument of read/unset/local/..., a function's body), or in `${var=...}` /
    `${var:=...}`. `$var`, `${var}` and `${var:-x}` only read it; text merely holding the name
    (`/srv/CODEX_HOME/x`, `$CODEX_HOME_WORK`) is neither."""
    start = 0
    while True:
        hit = code.find(var, start)
        if hit < 0:
            return False
        start = hit + len(var)
        after = code[start:start + 1]
        if after and (after.isalnum() or after == "_"):
            continue  # a longer name
        before = code[hit - 1:hit] if hit else " "
        if before == "$":
            continue
        if before == "{" and code[hit - 2:hit - 1] == "$":
            if after in _EXPANSION_READS and not code[start:start + 2] == ":=":
                continue
            return True
        if before in _WORD_STARTS:
            return True


def _export_tail_problem(data: bytes, vendor: Lines, at: int) -> Optional[str]:
    """Anything after the export line's value but blanks and a comment: a second command or
    assignment the rewrite would leave in place."""
    try:
        _start, end = _value_at(data, at)
    except InvalidShellWordError:
        return None  # rewrite_export refuses it with its own sentence
    if _EXPORT_TAIL_RE.match(data, end, _line_end(data, at)) is not None:
        return None
    var = vendor.export_var.decode("ascii")
    return ("line %d holds more than the export of %s (another command or assignment after its value), which "
            "the switch would leave in place: put `export %s=\"$%s<NAME>\"` alone on its line"
            % (_line_number(data, at), var, var, vendor.entry_prefix.decode("ascii")))


def _not_top_level(data: bytes, vendor: Lines, at: int) -> Optional[str]:
    """The export line inside a compound command begun above it (a function, if, loop, subshell),
    or continued from the line above: the shell may never run it, or run it as part of another."""
    line_start = data.rfind(b"\n", 0, at) + 1
    head = data[:line_start]
    continued = head.rstrip(b"\r\n").endswith(b"\\") and head.endswith(b"\n")
    if not continued and shell_problem(head) is None:
        return None
    if not continued and shell_problem(data) is not None:
        return None  # the whole file is not valid shell: the switch's own check says so
    return ("line %d is not a command of its own: it is inside a function, an if, a loop or a subshell "
            "begun above it, or continues the line above, so the shell may not run it as written: put the "
            "export of %s at the top level of the file" % (_line_number(data, at),
                                                             vendor.export_var.decode("ascii")))


def _other_lines_problem(data: bytes, vendor: Lines, at: Optional[int]) -> Optional[str]:
    """A line other than the export line that sets the variable, or that sources a file or
    evaluates text, which could set it where the switch cannot see."""
    var = vendor.export_var.decode("ascii")
    export_line = _line_number(data, at) if at is not None else None
    for number, line in enumerate(data.split(b"\n"), start=1):
        # Most lines hold neither the name nor a command that runs text: a look at the raw bytes
        # (a superset of what the shell reads there) settles them at C speed.
        if number == export_line or (vendor.export_var not in line and not _RUNS_TEXT_BYTES_RE.search(line)):
            continue
        code = code_part(line.decode("latin-1"))
        if _RUNS_TEXT_RE.search(unquoted(code)):
            return ("line %d sources another file or evaluates text (`.`, `source` or `eval`), which may set %s "
                    "where the switch cannot see: keep the accounts file to plain assignments" % (number, var))
        if var in code and _sets_name(code, var) and code.strip() != "export " + var:
            where = ("another line than the export line (line %d)" % export_line) if export_line \
                else "a line that is no export line of the form the switch writes"
            return ("line %d sets %s, or names it as something to set, on %s, so the shell may end with another "
                    "account than the switch writes: keep one line that sets %s, the export line"
                    % (number, var, where, var))
    return None


def ownership_problem(data: bytes, provider: str) -> Optional[str]:
    """Why the rewrite could not own the active account: a sentence naming the line, or None."""
    vendor = _lines_of(provider)
    at = _last_export(data, vendor)
    if at is not None:
        for check in (_export_tail_problem, _not_top_level):
            problem = check(data, vendor, at)
            if problem is not None:
                return problem
    return _other_lines_problem(data, vendor, at)


def _line_problem(data: bytes, vendor: Lines, to_label: str) -> Optional[str]:
    """The target's own line, or an export line, that the shell would take wrongly (envlint)."""
    export_var = vendor.export_var.decode("ascii")
    prefixes = [(vendor.entry_prefix.decode("ascii"), vendor.label_prefix)]
    for needle in (vendor.entry_prefix, vendor.export_var):
        for line_start, _hit in _lines_naming(data, needle):
            line = data[line_start:_line_end(data, line_start)].decode("latin-1")
            for problem in line_problems(line, prefixes, (export_var,)):
                # What follows the export line's value is kept as it is, so only a value the shell
                # would not take as an assignment at all stands in the way there.
                if problem["label"] == to_label or (problem["label"] is None
                                                    and problem["problem"] != UNQUOTED_BLANK):
                    return "line %d: %s" % (_line_number(data, line_start), sentence(problem))
    return None


def refusal(data: bytes, provider: str, to_label: str) -> Optional[str]:
    """Why rewriting the export line would not make `to_label` what the shell ends with, as a
    sentence naming the line and the fix; None when nothing in the text stands in the way.

    The account's own line as the shell would take it wrongly (envlint), an export line
    evaluated before the account line it refers to, a later line that sets the export
    variable again (the shell keeps that one), and whatever else the rewrite cannot own
    (ownership_problem)."""
    vendor = _lines_of(provider)
    problem = _line_problem(data, vendor, to_label)
    if problem is not None:
        return problem
    at = _last_export(data, vendor)
    if at is not None:
        export_var = vendor.export_var.decode("ascii")
        export_line = _line_number(data, at)
        first = _first_definition(data, vendor, to_label)
        if first is not None and first > at:
            return ("line %d sets %s before line %d defines the account's variable, so the shell makes no account "
                    "active: move the export line below the account lines" % (export_line, export_var,
                                                                              _line_number(data, first)))
        later = _later_assignment(data, vendor, at)
        if later is not None:
            return ("line %d sets %s again after the export line (line %d), so the shell may end with another "
                    "account than the switch writes: keep one export line, the last to set it"
                    % (later, export_var, export_line))
    return ownership_problem(data, provider)


# /bin/sh -n reads a file of a few hundred lines in milliseconds.
SHELL_CHECK_TIMEOUT_S = 10.0


def shell_problem(data: Optional[bytes] = None, source: Optional[IO[bytes]] = None) -> Optional[str]:
    """None when `/bin/sh -n` accepts `data` (or the open file `source`), else why not, in words:
    the line the shell stops at, never its text (bash quotes the line, which may hold a token)."""
    try:
        proc = subprocess.run(["/bin/sh", "-n", "/dev/stdin"], input=data, stdin=source if data is None else None,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={"PATH": os.defpath}, cwd="/",
                              timeout=SHELL_CHECK_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return "/bin/sh -n could not check it"
    if proc.returncode == 0:
        return None
    line = syntax_error_line(proc.stderr, b"/dev/stdin")
    return "the shell stops at a syntax error on line %d" % line if line else "the shell rejects it"


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
                     before_rename: Optional[Callable[[], None]] = None,
                     verify: Optional[Callable[[str], None]] = None) -> None:
    """Atomically put `data` at `path`, unless the file is no longer `before`.

    Through _files.write_bytes_atomic: a temporary file created 0600 in the same
    directory is written and fsynced. Before its rename it is given the file's own
    mode, and `verify(temporary path)`, when given, may refuse it by raising. Then
    the file is read again, and only when its identity (device, inode, size, mtime)
    and bytes are still those of `before` is the temporary renamed over it
    (FileChangedError otherwise); a refused temporary is removed. The switch command
    holds its lock throughout, so two switches never interleave; the check catches
    an editor or a script.
    """
    def check(tmp: Path) -> None:
        os.chmod(str(tmp), before.mode)
        if verify is not None:
            verify(str(tmp))
        if before_rename is not None:
            before_rename()
        if not _unchanged(path, before):
            raise FileChangedError("%s changed while the switch was being written; nothing replaced, "
                                   "run it again" % path)

    write_bytes_atomic(os.path.abspath(path), data, 0o600, before_replace=check)
