"""The only code that writes files: atomic replace, 0600 creation, locked appends, reverse reads."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
import time
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Iterator, List, Optional, Union

from ._dirs import UnsafePathError, check_private_dir, ensure_dir  # the directories these files live in
from .errors import FACE, SvcpostureError

PathLike = Union[str, "os.PathLike[str]"]

FILE_MODE = 0o600
_BLOCK = 64 * 1024
# The temp file of an atomic write: `.<target name>.<12 hex>.tmp` beside the target.
_TEMP_NAME_RE = re.compile(r"\A\.(?P<target>.+)\.[0-9a-f]{12}\.tmp\Z", re.S)
# A write takes milliseconds; a temp file this old was left by a process that was
# killed between creating and replacing it. Younger ones may belong to a live write.
STALE_TEMP_AGE_S = 3600.0


class CorruptFileError(SvcpostureError, ValueError):
    """A file exists but does not hold what it should; it is never overwritten."""

    __module__ = FACE

    def __init__(self, path: PathLike, message: str, line: int = 0, column: int = 0) -> None:
        self.path = str(path)
        self.line = line
        self.column = column
        where = "%s:%d:%d" % (self.path, line, column) if line else self.path
        super().__init__("%s: %s" % (where, message))


def open_nofollow(path: PathLike, flags: int, mode: int = FILE_MODE) -> int:
    """os.open that never follows a symlink at `path` and only opens a regular file.

    A link planted where the package writes would otherwise redirect the
    write to any file this user may write, outside HOME included.
    """
    try:
        fd = os.open(str(path), flags | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(path, "it is a symbolic link") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePathError(path, "it is not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(str(directory), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        # Some filesystems refuse fsync on a directory; the replace is still atomic.
        pass
    finally:
        os.close(fd)


def write_bytes_atomic(path: PathLike, data: bytes, mode: int = FILE_MODE, fsync: bool = True,
                       before_replace: Optional[Callable[[Path], None]] = None) -> None:
    """Temp file in the same directory, fsync, os.replace, fsync of the directory.

    The temp file is created with `mode` by os.open itself, so the secret is never
    readable by others, not even for an instant; fchmod then undoes any umask.
    `fsync=False` keeps the replace atomic but not durable, for a write whose loss
    in a power cut the next start repairs anyway. `before_replace(temp path)`, when
    given, runs once the data is written and may refuse the replace by raising: the
    temp file is then removed and the target left as it was (a checked rewrite).
    """
    target = Path(path)
    directory = ensure_dir(target.parent)
    tmp = directory / (".%s.%s.tmp" % (target.name, os.urandom(6).hex()))  # see _TEMP_NAME_RE
    fd = os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp)
        raise
    os.close(fd)
    try:
        if before_replace is not None:
            before_replace(tmp)
        os.replace(str(tmp), str(target))
    except BaseException:
        _unlink_quietly(tmp)
        raise
    if fsync:
        _fsync_dir(directory)


@contextlib.contextmanager
def exclusive_lock(path: PathLike) -> Iterator[None]:
    """Hold flock on the directory of `path` for a read-modify-write of it.

    The data file itself is replaced atomically, and a lock on a replaced inode
    protects nothing; locking the directory needs no extra file lying around.
    """
    directory = ensure_dir(Path(path).parent)
    fd = os.open(str(directory), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class LockBusyError(SvcpostureError):
    """Another process held the lock for the whole wait; `holder` is its pid when known."""

    __module__ = FACE

    def __init__(self, path: PathLike, waited_s: float, holder: Optional[int]) -> None:
        who = "another process"
        if holder is not None:
            who = "pid %d" % holder
            name = _process_name(holder)
            if name:
                who += " (%s)" % name
        super().__init__("%s is held by %s; gave up after %g s" % (path, who, waited_s))
        self.holder = holder


def _process_name(pid: int) -> Optional[str]:
    """The command name of `pid` (Linux /proc; the kernel's own 15 characters), else None."""
    try:
        with open("/proc/%d/comm" % pid, "rb") as fh:
            name = fh.read(64).decode("utf-8", "replace").strip()
    except OSError:
        return None
    return "".join(ch if ch.isprintable() else "?" for ch in name) or None


def lock_holder(fd: int) -> Optional[int]:
    """The pid holding a flock on the file open at `fd`, from /proc/locks (Linux), else None."""
    st = os.fstat(fd)
    key = "%02x:%02x:%d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    try:
        with open("/proc/locks", "rb") as fh:
            table = fh.read(1 << 20).decode("ascii", "replace")
    except OSError:
        return None
    for row in table.splitlines():
        parts = row.split()
        # `N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE ...`; a `->` row is a waiter, not the holder.
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == key and parts[4].isdigit():
            return int(parts[4])
    return None


def _flock_within(fd: int, path: PathLike, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    delay = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        left = deadline - time.monotonic()
        if left <= 0:
            raise LockBusyError(path, wait_s, lock_holder(fd))
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.1)


@contextlib.contextmanager
def lock_file(path: PathLike, wait_s: Optional[float] = None) -> Iterator[None]:
    """Hold flock on a dedicated lock file (created 0600) for a critical section.

    With `wait_s`, a lock another process holds longer than that raises
    LockBusyError, which names the holder, instead of waiting forever."""
    target = Path(path)
    ensure_dir(target.parent)
    fd = open_nofollow(target, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        if wait_s is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            _flock_within(fd, target, wait_s)
        yield
    finally:
        os.close(fd)


def memory_file(data: bytes, name: str) -> Optional[int]:
    """A descriptor of an anonymous file in memory holding `data` (memfd_create: never on a disk, gone
    with its last descriptor), for a child to read what must not be written anywhere; the caller
    closes it. None where the system has no such file."""
    create = getattr(os, "memfd_create", None)
    if create is None:
        return None
    fd = create(name, getattr(os, "MFD_CLOEXEC", 0))
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_text_atomic(path: PathLike, text: str, mode: int = FILE_MODE, fsync: bool = True) -> None:
    write_bytes_atomic(path, text.encode("utf-8"), mode, fsync)


def write_json_atomic(path: PathLike, obj: Any, mode: int = FILE_MODE, fsync: bool = True) -> None:
    text = json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n"
    write_text_atomic(path, text, mode, fsync)


def remove_stale_temps(directory: PathLike, *, targets: Optional[Collection[str]] = None,
                       max_age_s: float = STALE_TEMP_AGE_S, now: Optional[float] = None) -> List[Path]:
    """Delete the temp files of atomic writes in `directory` that were last
    modified more than `max_age_s` ago (a writer killed before its os.replace);
    returns what was removed.

    Only regular files named like our temp files are touched, and with `targets`
    only those of the named target files (for directories shared with others,
    such as HOME). A missing or unreadable directory removes nothing."""
    cutoff = (time.time() if now is None else now) - max_age_s
    removed: List[Path] = []
    try:
        entries = list(os.scandir(str(directory)))
    except OSError:
        return removed
    for entry in entries:
        match = _TEMP_NAME_RE.match(entry.name)
        if match is None or (targets is not None and match.group("target") not in targets):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode) or st.st_mtime >= cutoff:
                continue
            os.unlink(entry.path)
        except OSError:
            continue
        removed.append(Path(entry.path))
    return removed


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(str(path))
    except OSError:
        pass


# Config and state files are small; anything bigger is hostile or broken.
MAX_JSON_BYTES = 4 * 1024 * 1024


def read_json(path: PathLike, max_bytes: int = MAX_JSON_BYTES) -> Optional[Any]:
    """Parsed JSON, or None when the file does not exist.

    Raises CorruptFileError (naming file, line and column) for anything that is not
    valid UTF-8 JSON, and OSError when the file exists but cannot be read.
    """
    p = Path(path)
    try:
        with open(str(p), "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except (FileNotFoundError, NotADirectoryError):
        # ENOTDIR: a parent is a regular file, so this file cannot exist either.
        return None
    except IsADirectoryError:
        raise CorruptFileError(p, "is a directory, not a JSON file")
    if len(raw) > max_bytes:
        raise CorruptFileError(p, "larger than %d bytes" % max_bytes)
    if not raw.strip():
        raise CorruptFileError(p, "empty file, expected JSON", 1, 1)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise CorruptFileError(p, "not UTF-8", line, column) from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorruptFileError(p, exc.msg, exc.lineno, exc.colno) from None
    except RecursionError:
        raise CorruptFileError(p, "nested too deeply") from None
    except ValueError as exc:
        # e.g. an integer literal longer than the interpreter's digit limit (3.11+).
        raise CorruptFileError(p, str(exc)) from None
    if value is None:
        # None means "no file" to every caller; a file holding null is damage,
        # and must not be mistaken for absence (and then overwritten).
        raise CorruptFileError(p, "holds JSON null, expected a value", 1, 1)
    return value


def move_aside(path: PathLike, tag: str = "corrupt") -> Optional[Path]:
    """Rename a bad file next to itself so that nothing is silently dropped."""
    p = Path(path)
    aside = p.with_name("%s.%s-%s" % (p.name, tag, os.urandom(4).hex()))
    try:
        os.replace(str(p), str(aside))
    except FileNotFoundError:
        return None
    return aside


def append_line(path: PathLike, line: Union[str, bytes], fsync: bool = True) -> None:
    """Append one line with a single os.write under flock on an O_APPEND file.

    A torn last line (a writer that died mid-line) is sealed with a newline first,
    so the new record always starts on its own line. A short write is undone by
    truncating back to the size before it, so readers never see half a record.
    """
    append_lines(path, [line], fsync)


def append_lines(path: PathLike, lines: Iterable[Union[str, bytes]], fsync: bool = True) -> None:
    """Append several lines as ONE record write: all of them or none (see append_line).

    For records that belong together (the history rows of one probe): a reader
    never sees some of them without the others, and a failure leaves none.
    """
    records = []
    for line in lines:
        raw = line.encode("utf-8") if isinstance(line, str) else bytes(line)
        if b"\n" in raw.rstrip(b"\n"):
            raise ValueError("a log record must be a single line")
        records.append(raw if raw.endswith(b"\n") else raw + b"\n")
    if records:
        _append(Path(path), b"".join(records), fsync)


def _append(p: Path, data: bytes, fsync: bool) -> None:
    # Read-write so that the torn-line check reads the very inode being appended
    # to, through the same descriptor (O_APPEND still sends every write to the end).
    # The directory is checked on every append, not only when it is created:
    # one that others may write lets them swap the log between two appends.
    try:
        check_private_dir(p.parent)
    except UnsafePathError:
        if os.path.isdir(str(p.parent)):
            raise
        ensure_dir(p.parent)  # absent: created (and checked) now
    fd = open_nofollow(p, os.O_RDWR | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(fd).st_size
            if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            try:
                written = os.write(fd, data)
            except OSError:
                _truncate_back(fd, size)
                raise
            if written != len(data):
                _truncate_back(fd, size)
                raise OSError(errno.EIO, "short write to %s" % p)
            if fsync:
                try:
                    os.fsync(fd)
                except OSError:
                    # The caller is told the record is not durable and will retry
                    # it; leaving it in the file would make that retry a duplicate.
                    _truncate_back(fd, size)
                    raise
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _truncate_back(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass


def iter_lines_reverse(path: PathLike, block: int = _BLOCK, max_line: Optional[int] = None) -> Iterator[bytes]:
    """Complete lines of a file, newest first, reading backwards in blocks.

    The cost depends on how far back the caller reads, not on the file size. A
    torn last line (no trailing newline) is yielded too; callers skip what does
    not parse. Missing files yield nothing. Lines longer than `max_line` bytes
    are skipped without being held in memory (a crash can leave megabytes of
    NUL bytes with no newline at the end of a file).
    """
    try:
        fh = open(str(path), "rb")
    except FileNotFoundError:
        return
    with fh:
        fh.seek(0, os.SEEK_END)
        position = fh.tell()
        # The partial line at the front of the blocks read so far, as a list of
        # pieces in reverse file order: joined once, so a long line costs O(n).
        carry: list = []
        carry_len = 0
        overflow = False
        while position > 0:
            step = min(block, position)
            position -= step
            fh.seek(position)
            chunk = fh.read(step)
            cut = chunk.rfind(b"\n")
            if cut < 0:
                if not overflow:
                    carry.append(chunk)
                    carry_len += len(chunk)
                    if max_line is not None and carry_len > max_line:
                        overflow, carry = True, []
                continue
            tail = chunk[cut + 1:]
            if not overflow and (max_line is None or carry_len + len(tail) <= max_line):
                carry.append(tail)
                line = b"".join(reversed(carry))
                if line:
                    yield line
            pieces = chunk[:cut].split(b"\n")
            for piece in reversed(pieces[1:]):
                if piece and (max_line is None or len(piece) <= max_line):
                    yield piece
            carry, carry_len, overflow = [pieces[0]], len(pieces[0]), False
            if max_line is not None and carry_len > max_line:
                overflow, carry = True, []
        if not overflow:
            line = b"".join(reversed(carry))
            if line:
                yield line


def tail_lines(path: PathLike, count: int) -> list:
    """The newest `count` non-empty lines, oldest first."""
    out = []
    for piece in iter_lines_reverse(path):
        if len(out) >= count:
            break
        out.append(piece)
    out.reverse()
    return out


def create_new_atomic(path: PathLike, data: bytes, mode: int = FILE_MODE) -> bool:
    """Write `path` only when nothing is there: whole, with `mode`, or not at all.

    The content goes to a temp file first (as write_bytes_atomic) and is then
    hard-linked into place, which fails rather than replace anything that
    appeared meanwhile. Returns False, writing nothing, when `path` exists.
    """
    target = Path(path)
    directory = ensure_dir(target.parent)
    tmp = directory / (".%s.%s.new" % (target.name, os.urandom(6).hex()))
    write_bytes_atomic(tmp, data, mode)
    try:
        os.link(str(tmp), str(target))
    except FileExistsError:
        return False
    finally:
        _unlink_quietly(tmp)
    _fsync_dir(directory)
    return True
