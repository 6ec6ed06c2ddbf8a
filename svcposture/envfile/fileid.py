"""Which accounts file: a fingerprint that the monitor and a switch on the same machine compute alike.

`svc-monitor switch` edits this node's accounts file and judges it by the posture of the
monitor it asks. A monitor that watches another file (another node's, through `--url`, or
another home's on this machine) has other accounts under the same labels, and its posture
(emails included) is not this file's. The monitor says which file it watches in /healthz as
this fingerprint, and the switch compares it with its own.

The fingerprint is the first 16 hex digits of SHA-256 over the machine's name, the real path
of the file's directory, that directory's device and inode, and the file's name: stable while
the file is rewritten (a switch renames a new file into place; the directory stays), different
for another directory or another machine, and saying nothing of where the file is.
"""
from __future__ import annotations

import hashlib
import os
from typing import Optional


def file_id(path: str) -> Optional[str]:
    """The fingerprint of the accounts file at `path`; None when its directory does not exist."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        st = os.stat(folder)
    except OSError:
        return None
    parts = (os.uname().nodename, os.path.realpath(folder), str(st.st_dev), str(st.st_ino), os.path.basename(path))
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:16]
