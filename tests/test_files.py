"""The files layer: atomic 0600 writes, strict JSON reads, locked appends, reverse reads."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcposture import _files
from svcposture._dirs import ensure_dir
from svcposture._files import (CorruptFileError, append_line, iter_lines_reverse, move_aside,
                               read_json, tail_lines, write_json_atomic, write_text_atomic)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(str(path)).st_mode)


# ---------------------------------------------------------------- atomic writes

def test_atomic_write_creates_0600_and_leaves_no_temp(home: Path) -> None:
    target = home / "a" / "b" / "secret.json"
    old_umask = os.umask(0)
    try:
        write_json_atomic(target, {"k": "v"})
    finally:
        os.umask(old_umask)
    assert json.loads(target.read_text()) == {"k": "v"}
    assert mode_of(target) == 0o600
    assert mode_of(target.parent) == 0o700
    assert os.listdir(str(target.parent)) == ["secret.json"]


def test_temp_file_is_0600_from_the_moment_it_exists(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Observe the temp file at creation: the mode must already be 0600 even with
    # umask 0, i.e. there is no window where the secret is readable by others.
    seen = []
    real_open = os.open

    def spy_open(path, flags, mode=0o777, *a, **kw):
        fd = real_open(path, flags, mode, *a, **kw)
        if flags & os.O_CREAT:
            seen.append((str(path), stat.S_IMODE(os.fstat(fd).st_mode), os.fstat(fd).st_size))
        return fd

    monkeypatch.setattr(_files.os, "open", spy_open)
    old_umask = os.umask(0)
    try:
        write_text_atomic(home / "s.env", "TOKEN=canary\n")
    finally:
        os.umask(old_umask)
    assert seen, "no file was created through os.open"
    for path, mode, size in seen:
        assert mode == 0o600, (path, oct(mode))
        assert size == 0
        assert Path(path).name != "s.env", "the target itself must never be opened for writing"


def test_atomic_write_replaces_and_tightens_existing_mode(home: Path) -> None:
    target = home / "c.json"
    target.write_text("old")
    os.chmod(str(target), 0o644)
    inode_before = os.stat(str(target)).st_ino
    write_json_atomic(target, [1, 2])
    assert json.loads(target.read_text()) == [1, 2]
    assert mode_of(target) == 0o600
    assert os.stat(str(target)).st_ino != inode_before, "must be a replace, not an in-place rewrite"


def test_atomic_write_honours_explicit_mode(home: Path) -> None:
    target = home / "pub.json"
    write_json_atomic(target, {}, mode=0o644)
    assert mode_of(target) == 0o644


def test_atomic_write_into_unwritable_place_raises_and_leaves_nothing(home: Path) -> None:
    # Running as root, chmod cannot make a directory unwritable; a parent that is
    # a regular file refuses every user, root included.
    blocker = home / "blocker"
    blocker.write_text("i am a file")
    with pytest.raises(OSError):
        write_json_atomic(blocker / "x.json", {"a": 1})
    assert blocker.read_text() == "i am a file"
    assert sorted(os.listdir(str(home))) == ["blocker"]


def test_atomic_write_failure_keeps_old_content(home: Path) -> None:
    target = home / "keep.json"
    write_json_atomic(target, {"v": 1})
    with pytest.raises(TypeError):
        write_json_atomic(target, {"v": object()})
    assert json.loads(target.read_text()) == {"v": 1}
    assert os.listdir(str(home)) == ["keep.json"]


# ---------------------------------------------------------------- strict reads

def test_read_json_missing_is_none(home: Path) -> None:
    assert read_json(home / "nope.json") is None


@pytest.mark.parametrize("raw, line, column", [
    (b"", 1, 1),
    (b"   \n\t\n", 1, 1),
    (b'{"svc": {"host": ', 1, 18),             # truncated
    (b'{\n  "a": 1,\n  "b": tru\n}', 3, 8),    # corrupt on line 3
    (b'{"a": 1}\n{"b": 2}', 2, 1),              # extra data
    (b'{"a": "\xff\xfe"}', 1, 8),               # not UTF-8
    (b'\n\n  "\xc3', 3, 4),                     # truncated multibyte sequence
])
def test_read_json_corrupt_names_line_and_column(home: Path, raw: bytes, line: int, column: int) -> None:
    path = home / "bad.json"
    path.write_bytes(raw)
    with pytest.raises(CorruptFileError) as info:
        read_json(path)
    err = info.value
    assert (err.path, err.line, err.column) == (str(path), line, column)
    assert str(err).startswith("%s:%d:%d: " % (path, line, column))
    assert path.read_bytes() == raw, "a corrupt file is never touched by a read"


@pytest.mark.parametrize("raw", [
    b"[" * 100000 + b"]" * 100000,            # nested too deeply
    b"1" * 5000,                               # beyond the int digit limit of 3.11+
    b"\xef\xbb\xbf{}",                         # a BOM is not JSON
    b"\x00\x00\x00",
    b" null\n",                                # null would read as "no file"
])
def test_read_json_hostile_raises_corrupt_not_crash(home: Path, raw: bytes) -> None:
    path = home / "hostile.json"
    path.write_bytes(raw)
    with pytest.raises(CorruptFileError):
        read_json(path)


def test_read_json_huge_is_refused_without_reading_it_all(home: Path) -> None:
    path = home / "huge.json"
    path.write_bytes(b'{"a": "' + b"x" * (_files.MAX_JSON_BYTES + 10) + b'"}')
    with pytest.raises(CorruptFileError, match="larger than"):
        read_json(path)
    assert read_json(path, max_bytes=_files.MAX_JSON_BYTES * 2) == {"a": "x" * (_files.MAX_JSON_BYTES + 10)}


def test_read_json_directory_is_corrupt(home: Path) -> None:
    (home / "dir.json").mkdir()
    with pytest.raises(CorruptFileError, match="directory"):
        read_json(home / "dir.json")


def test_move_aside_keeps_bytes(home: Path) -> None:
    path = home / "latch.json"
    path.write_bytes(b"{garbage")
    aside = move_aside(path)
    assert aside is not None and aside.parent == home
    assert aside.name.startswith("latch.json.corrupt-")
    assert aside.read_bytes() == b"{garbage"
    assert not path.exists()
    assert move_aside(path) is None


def test_ensure_dir_is_owner_only(home: Path) -> None:
    d = ensure_dir(home / "x" / "y")
    assert d.is_dir() and mode_of(d) == 0o700
    assert ensure_dir(d) == d


def test_ensure_dir_makes_every_missing_parent_0700_whatever_the_umask(home: Path) -> None:
    # pathlib gives intermediate parents the umask's mode; the package's are owner-only.
    for umask in (0o022, 0o000, 0o277):
        old = os.umask(umask)
        try:
            top = home / ("u%o" % umask)
            ensure_dir(top / "a" / "b" / "c")
        finally:
            os.umask(old)
        for d in (top, top / "a", top / "a" / "b", top / "a" / "b" / "c"):
            assert mode_of(d) == 0o700, (oct(umask), d)


def test_ensure_dir_leaves_existing_directories_alone(home: Path) -> None:
    shared = home / "shared"
    shared.mkdir()
    os.chmod(str(shared), 0o755)
    ensure_dir(shared / "mine")
    assert mode_of(shared) == 0o755 and mode_of(shared / "mine") == 0o700


def test_ensure_dir_over_a_file_raises_and_changes_nothing(home: Path) -> None:
    (home / "f").write_text("x")
    with pytest.raises(OSError):
        ensure_dir(home / "f")
    with pytest.raises(OSError):
        ensure_dir(home / "f" / "below")
    assert (home / "f").read_text() == "x"


# ---------------------------------------------------------------- appends

def test_append_creates_0600_and_one_line_per_record(home: Path) -> None:
    log = home / "ev" / "2026-01.jsonl"
    append_line(log, '{"a":1}')
    append_line(log, b'{"b":2}\n')
    assert log.read_bytes() == b'{"a":1}\n{"b":2}\n'
    assert mode_of(log) == 0o600


def test_append_refuses_multi_line_records(home: Path) -> None:
    log = home / "x.jsonl"
    with pytest.raises(ValueError):
        append_line(log, '{"a":1}\n{"b":2}')
    assert not log.exists() or log.read_bytes() == b""


def test_append_seals_a_torn_last_line(home: Path) -> None:
    log = home / "torn.jsonl"
    log.write_bytes(b'{"ok":1}\n{"half":')
    append_line(log, '{"next":2}')
    assert log.read_bytes() == b'{"ok":1}\n{"half":\n{"next":2}\n'
    lines = [json.loads(x) for x in log.read_bytes().splitlines() if _parses(x)]
    assert lines == [{"ok": 1}, {"next": 2}]


def _parses(raw: bytes) -> bool:
    try:
        json.loads(raw)
        return True
    except ValueError:
        return False


_SHORT_WRITE_CHILD = r"""
import os, resource, signal, sys
from svcposture._files import append_line
path = sys.argv[1]
size = os.path.getsize(path)
# The kernel itself produces the short write: a file-size limit a few bytes
# beyond the current end makes write() stop there (SIGXFSZ ignored -> EFBIG next).
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 7, size + 7))
try:
    append_line(path, '{"record":"' + "x" * 100 + '"}')
except OSError as exc:
    print("OSError", exc.errno)
    sys.exit(0)
print("no error")
sys.exit(1)
"""


@pytest.mark.parametrize("torn", [False, True])
def test_short_write_is_truncated_back(home: Path, env: dict, torn: bool) -> None:
    log = home / "short.jsonl"
    before = b'{"kept":1}\n' + (b'{"torn' if torn else b"")
    log.write_bytes(before)
    proc = subprocess.run([sys.executable, "-c", _SHORT_WRITE_CHILD, str(log)], env=env,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("OSError")
    assert log.read_bytes() == before, "the partial record (and its seal) must be gone"
    append_line(log, '{"after":2}')
    assert log.read_bytes().endswith(b'\n{"after":2}\n')


def test_append_into_unwritable_place_raises(home: Path) -> None:
    blocker = home / "events"
    blocker.write_text("file, not a directory")
    with pytest.raises(OSError):
        append_line(blocker / "2026-01.jsonl", "{}")
    assert blocker.read_text() == "file, not a directory"


# ---------------------------------------------------------------- reverse reads

def test_reverse_read_missing_and_empty(home: Path) -> None:
    assert list(iter_lines_reverse(home / "none")) == []
    (home / "empty").write_bytes(b"")
    assert list(iter_lines_reverse(home / "empty")) == []
    assert tail_lines(home / "none", 3) == []


@settings(max_examples=200, deadline=None, database=None)
@given(data=st.binary(max_size=80).map(lambda b: b.replace(b"\r", b"\n")),
       block=st.integers(min_value=1, max_value=17),
       max_line=st.one_of(st.none(), st.integers(min_value=0, max_value=12)))
def test_reverse_read_matches_forward_split(tmp_path_factory, data: bytes, block: int, max_line) -> None:
    path = tmp_path_factory.mktemp("rev") / "f"
    path.write_bytes(data)
    expected = [x for x in reversed(data.split(b"\n")) if x and (max_line is None or len(x) <= max_line)]
    assert list(iter_lines_reverse(path, block=block, max_line=max_line)) == expected


def test_reverse_read_yields_torn_tail_and_tail_lines_order(home: Path) -> None:
    path = home / "t.jsonl"
    path.write_bytes(b"a\nb\n\nc\nd-torn")
    assert list(iter_lines_reverse(path)) == [b"d-torn", b"c", b"b", b"a"]
    assert tail_lines(path, 2) == [b"c", b"d-torn"]
    assert tail_lines(path, 10) == [b"a", b"b", b"c", b"d-torn"]


def test_reverse_read_skips_a_huge_newline_free_tail_cheaply(home: Path) -> None:
    # NUL fill after a crash: many megabytes and no newline. With max_line it is
    # skipped; the line before it is still found.
    path = home / "nul.jsonl"
    with open(str(path), "wb") as fh:
        fh.write(b'{"first":1}\n')
        fh.write(b"\x00" * (8 * 1024 * 1024))
    assert next(iter_lines_reverse(path, max_line=1024 * 1024)) == b'{"first":1}'
    assert [len(x) for x in iter_lines_reverse(path)] == [8 * 1024 * 1024, 11]
