"""Directories the package writes in: created 0700, and refused when another user could write them.

A file is only as safe as the directories above it: whoever can write in one
of them can rename the file away or plant a symlink in its place. So every
directory the package creates is 0700 (each level made here, since pathlib's
parents get the umask's mode), and an existing one, with every ancestor, must
be owned by this user or root and not writable by group or others.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Optional, Union

from .errors import SvcpostureError

PathLike = Union[str, "os.PathLike[str]"]

# Directories the package creates hold secrets or per-node state: owner only.
DIR_MODE = 0o700


class UnsafePathError(SvcpostureError, PermissionError):
    """A directory or file another user could swap or redirect; the package refuses it.

    A PermissionError, so that every caller that already reports an OSError
    in one line (`exc.strerror`) reports this one the same way.
    """

    def __init__(self, path: PathLike, reason: str) -> None:
        message = "refusing to use %s: %s" % (path, reason)
        super().__init__(errno.EACCES, message)
        self.filename = str(path)

    def __str__(self) -> str:
        return str(self.strerror)


def ensure_dir(path: PathLike) -> Path:
    """`path` as a directory, creating it and every missing parent 0700.

    pathlib's `mkdir(parents=True)` gives the parents the umask's mode (0755
    as a rule) and the umask can strip bits from the leaf too, so each
    directory is made here and chmod'ed to 0700. Existing directories are
    only checked (check_private_dir): one that another user could write in
    is refused, and nothing is created below it.
    """
    p = Path(path)
    created = _first_missing(p)
    if created is not None:
        check_private_dir(created.parent)  # nothing is created inside an unsafe directory
        _make_private_dirs(Path(os.path.abspath(str(p))), created)
    check_private_dir(p, created)
    return p


def _make_private_dirs(leaf: Path, top: Path) -> None:
    """Create `top` and every directory below it down to `leaf`, each 0700.

    One mkdir and chmod per level: the umask cannot loosen a parent (as
    `mkdir(parents=True)` would) nor strip bits from the leaf.
    """
    chain = [leaf] + [parent for parent in leaf.parents if top in parent.parents or parent == top]
    for directory in reversed(chain):
        try:
            os.mkdir(str(directory), DIR_MODE)
        except FileExistsError:
            continue  # made meanwhile, or not a directory: check_private_dir judges it
        os.chmod(str(directory), DIR_MODE)


def _first_missing(p: Path) -> Optional[Path]:
    """The top-most of `p` and its ancestors that does not exist yet, or None."""
    p = Path(os.path.abspath(str(p)))
    missing = None
    for candidate in (p,) + tuple(p.parents):
        if os.path.lexists(str(candidate)):
            break
        missing = candidate
    return missing


def _unsafe_reason(st: os.stat_result, euid: int) -> Optional[str]:
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid not in (euid, 0):
        return "it is owned by uid %d, not by this user" % st.st_uid
    # A sticky directory (/tmp) is shared by design: nobody else may rename
    # or remove what this user puts there.
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        return "it is writable by group or others (mode %04o); chmod go-w it" % (st.st_mode & 0o7777)
    return None


def check_private_dir(path: PathLike, created: Union[bool, PathLike, None] = None) -> None:
    """Refuse a directory that another user could swap files in, or tighten it.

    The directory and every ancestor must be owned by this user or root and
    not writable by group or others (sticky directories excepted): otherwise
    another user can replace what the package writes there, or plant a
    symlink in its place. Directories the caller has just created (`created`:
    True for `path` alone, or the top-most directory created, which covers
    it and everything below it) are tightened to 0700; anything else that
    fails is refused with UnsafePathError, one line naming the path and the
    reason.
    """
    euid = os.geteuid()
    p = os.path.abspath(os.fspath(path))
    if created is True:
        top: Optional[str] = p
    elif created:
        top = os.path.abspath(os.fspath(created))  # type: ignore[arg-type]
    else:
        top = None
    directory = p
    while True:
        try:
            st = os.stat(directory)
        except FileNotFoundError:
            if directory == p:
                raise UnsafePathError(p, "it does not exist") from None
            st = None
        except OSError:
            st = None  # not searchable: then nobody reached p through it either
        if st is not None:
            reason = _unsafe_reason(st, euid)
            ours = top is not None and (directory == top or directory.startswith(top.rstrip(os.sep) + os.sep))
            if reason is not None and ours and stat.S_ISDIR(st.st_mode) and st.st_uid == euid:
                os.chmod(directory, DIR_MODE)
                reason = None
            if reason is not None:
                raise UnsafePathError(directory, reason)
        parent = os.path.dirname(directory)
        if parent == directory:
            return
        directory = parent


def unsafe_dir_reason(path: PathLike) -> Optional[str]:
    """Why `path` (an existing directory) is unsafe, or None; changes nothing (the doctor's view)."""
    try:
        check_private_dir(path, created=False)
    except UnsafePathError as exc:
        return str(exc)
    return None
