"""The cloud-token projection: cluster-cloud.json -> ~/.config/svc/cluster.env plus one ~/.zshenv guard line.

`~/.config/svc/cluster-cloud.json` becomes a sourceable `~/.config/svc/cluster.env`
(0600, atomic) and one guard line in `~/.zshenv` sources it, so login shells
inherit SVC_CLOUD_TOKEN. Nothing in the package reads that variable. Run by
`svc-stack sync-cloud-env`, by `svc-cluster sync`, and by the monitor on a timer.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Optional

from .._files import lock_file, write_bytes_atomic
from ..config import CLOUD_TOKEN_KEY, ConfigError, flatten, load_layer
from ..errors import SvcpostureError
from ..paths import Paths

# The marker identifies our line in ~/.zshenv; everything else there is the user's.
GUARD_MARKER = b"# svc-cloud-env (managed by svc-stack; holds no secret)"
_ENV_HEADER = "# Written by svc-stack sync-cloud-env from cluster-cloud.json. Do not edit; mode 0600.\n"
_MAX_ZSHENV_BYTES = 1024 * 1024


class ProjectionError(SvcpostureError, RuntimeError):
    """The cloud env could not be projected; nothing was half-written."""


def sh_single_quote(value: str) -> str:
    # Inside single quotes sh interprets nothing, so only ' itself needs care:
    # close the quote, emit an escaped quote, reopen.
    return "'" + value.replace("'", "'\\''") + "'"


def env_file_text(token: str) -> str:
    return _ENV_HEADER + "export SVC_CLOUD_TOKEN=%s\n" % sh_single_quote(token)


def guard_line(paths: Paths) -> bytes:
    target = paths.cluster_env
    try:
        rel = target.relative_to(paths.home)
        where = '"$HOME/%s"' % rel.as_posix()
    except ValueError:
        where = sh_single_quote(str(target))
    line = "if [ -r %s ]; then . %s; fi  " % (where, where)
    return line.encode("utf-8") + GUARD_MARKER


def _read_cloud_token(paths: Paths) -> Optional[str]:
    data = load_layer(paths.cluster_cloud)
    value = flatten(data).get(CLOUD_TOKEN_KEY)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ProjectionError("%s: %s must be a string" % (paths.cluster_cloud, CLOUD_TOKEN_KEY))
    if "\x00" in value:
        raise ProjectionError("%s: %s contains a NUL byte and cannot live in the environment"
                              % (paths.cluster_cloud, CLOUD_TOKEN_KEY))
    return value or None


def _project_env_file(paths: Paths, token: Optional[str]) -> str:
    target = paths.cluster_env
    if token is None:
        try:
            os.unlink(str(target))
        except FileNotFoundError:
            return "absent"
        return "removed"
    wanted = env_file_text(token).encode("utf-8")
    try:
        with open(str(target), "rb") as fh:
            current = fh.read(len(wanted) + 1)
        mode = os.stat(str(target)).st_mode & 0o7777
    except FileNotFoundError:
        current, mode = None, None
    if current == wanted and mode == 0o600 and not target.is_symlink():
        return "unchanged"
    write_bytes_atomic(target, wanted, 0o600)
    return "written" if current is None else "updated"


def _ensure_guard(paths: Paths) -> str:
    # Follow a symlinked ~/.zshenv (dotfile managers) so the link itself survives.
    real = Path(os.path.realpath(str(paths.zshenv)))
    line = guard_line(paths)
    try:
        st = os.stat(str(real))
    except FileNotFoundError:
        write_bytes_atomic(real, line + b"\n", 0o644)
        return "added"
    if st.st_size > _MAX_ZSHENV_BYTES:
        raise ProjectionError("%s is larger than %d bytes; not editing it" % (paths.zshenv, _MAX_ZSHENV_BYTES))
    with open(str(real), "rb") as fh:
        original = fh.read(_MAX_ZSHENV_BYTES + 1)
    lines = original.split(b"\n")
    ours = [i for i, text in enumerate(lines) if GUARD_MARKER in text]
    if len(ours) == 1 and lines[ours[0]] == line:
        return "unchanged"
    if ours:
        # Keep the first position, drop duplicates; every other line stays byte for byte.
        lines[ours[0]] = line
        for i in reversed(ours[1:]):
            del lines[i]
        updated = b"\n".join(lines)
        action = "updated"
    else:
        updated = original
        if updated and not updated.endswith(b"\n"):
            updated += b"\n"
        updated += line + b"\n"
        action = "added"
    write_bytes_atomic(real, updated, st.st_mode & 0o7777)
    return action


def project_cloud_env(paths: Paths) -> Dict[str, Any]:
    """Project the cloud token into cluster.env and the ~/.zshenv guard.

    Returns a token-free report; never raises for bad input or I/O trouble
    (the monitor calls this on a timer), it reports `ok: false` with `error`.
    """
    report: Dict[str, Any] = {
        "ok": True,
        "token": "absent",
        "source": str(paths.cluster_cloud),
        "envFile": str(paths.cluster_env),
        "envFileAction": "unchanged",
        "zshenv": str(paths.zshenv),
        "guardAction": "not-needed",
        "changed": False,
    }
    try:
        # The monitor projects every few minutes while an operator may run the CLI.
        with lock_file(paths.config_dir / ".cluster-env.lock"):
            token = _read_cloud_token(paths)
            report["token"] = "present" if token is not None else "absent"
            report["envFileAction"] = _project_env_file(paths, token)
            if token is not None:
                report["envFileMode"] = "0600"
                report["guardAction"] = _ensure_guard(paths)
    except (ConfigError, ProjectionError) as exc:
        report.update(ok=False, error=str(exc))
    except OSError as exc:
        report.update(ok=False, error="%s: %s" % (exc.filename or "I/O", exc.strerror or exc))
    report["changed"] = report["envFileAction"] in ("written", "updated", "removed") or \
        report["guardAction"] in ("added", "updated")
    return report
