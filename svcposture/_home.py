"""The node's home directory, from the environment, refused when it names no home.

Its own small module because every command checks it first, the status line
included, which runs on every render of the agent's prompt: pathlib and
typing cost more to import than the whole check.
"""
from __future__ import annotations

import os

from ._text import printable
from .errors import SvcpostureError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping


class HomeError(SvcpostureError, ValueError):
    """$HOME is set but empty, relative or not an existing directory: every node path would land somewhere else."""


def home_of(environ: Mapping[str, str]) -> str:
    """The node's home from `environ`: $HOME, else the account's home directory.

    A HOME that is set but empty or relative is refused: `~/svc` would become
    `/svc` (expanduser of an empty HOME) or a directory below whatever the
    current directory happens to be, and the node's state would be written
    outside any home. So is one that does not exist or is not a directory:
    the package never creates a home.
    """
    value = environ.get("HOME")
    if value is None:
        return os.path.expanduser("~")  # HOME unset: the password database's entry
    if not value:
        raise HomeError("HOME is set but empty; set it to the absolute path of your home directory")
    if not os.path.isabs(value):
        raise HomeError("HOME is relative (%r); set it to the absolute path of your home directory"
                        % printable(value))
    if not os.path.isdir(value):
        # Creating it would put the node's state, and its accounts file, in a
        # directory nobody chose: a mistyped or stale HOME, or a service
        # account's placeholder home such as /nonexistent.
        raise HomeError("HOME is %r, which %s; set it to the absolute path of your home directory"
                        % (printable(value), "is not a directory" if os.path.lexists(value) else "does not exist"))
    return value
