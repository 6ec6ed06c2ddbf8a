"""Every on-disk location of a node, derived from $HOME so that tests can relocate a node.

`home_of(environ)` is the node's home, refused when it names none; every
command checks it first, the status line included, which runs on every
render of the agent's prompt. So this module imports neither pathlib nor
typing at load (they cost more than the whole check): `Paths` loads pathlib
when one is built.
"""
from __future__ import annotations

import os

from ._text import printable
from .errors import SvcpostureError
from .settings import accounts_env_path, login_credentials_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Mapping, Optional

__all__ = ["HomeError", "Paths", "home_of"]


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


def _path(text: "os.PathLike[str] | str") -> Path:
    from pathlib import Path

    return Path(text)


class Paths:
    """The locations of one node. Nothing is created or read here."""

    def __init__(self, home: "Optional[os.PathLike[str] | str]" = None,
                 environ: Optional[Mapping[str, str]] = None) -> None:
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        if home is None:
            home = home_of(self.environ)
        self.home = _path(home)

    @classmethod
    def for_home(cls, home: "Optional[os.PathLike[str] | str]" = None,
                 environ: Optional[Mapping[str, str]] = None) -> "Paths":
        """The node at `home` (None: $HOME of `environ`), as the library face takes it.

        With `home`, the environment is a copy whose HOME is that directory,
        made absolute: the children of the node (the probe child, which runs
        in /) see the same home as the parent.
        """
        environ = os.environ if environ is None else environ
        if home is None:
            return cls(environ=environ)
        absolute = os.path.abspath(os.fspath(home))
        env = dict(environ)
        env["HOME"] = absolute
        return cls(absolute, environ=env)

    # Layer 2: ~/.config/svc/
    @property
    def config_dir(self) -> Path:
        return self.home / ".config" / "svc"

    @property
    def cluster_secrets(self) -> Path:
        return self.config_dir / "cluster-secrets.json"

    @property
    def node_json(self) -> Path:
        return self.config_dir / "node.json"

    @property
    def config_json(self) -> Path:
        return self.config_dir / "config.json"

    @property
    def cluster_cloud(self) -> Path:
        return self.config_dir / "cluster-cloud.json"

    @property
    def cluster_env(self) -> Path:
        return self.config_dir / "cluster.env"

    def personal_config(self, team_key: str) -> Path:
        return self.config_dir / ("config-%s.json" % team_key)

    @property
    def accounts_env(self) -> Path:
        override = accounts_env_path(self.environ)
        return _path(override) if override else self.config_dir / "model-accounts.env"

    @property
    def metrics_token(self) -> Path:
        """The bearer token a listener off the loopback asks for (docs/fleet-prometheus.md)."""
        return self.config_dir / "metrics-token"

    # ~/svc/
    @property
    def svc_dir(self) -> Path:
        return self.home / "svc"

    @property
    def events_dir(self) -> Path:
        return self.svc_dir / "events"

    @property
    def history_dir(self) -> Path:
        return self.svc_dir / "history"

    @property
    def latch(self) -> Path:
        return self.svc_dir / "account-status-latch.json"

    @property
    def alert_latch(self) -> Path:
        return self.svc_dir / "alert-latch.json"

    @property
    def run_dir(self) -> Path:
        return self.svc_dir / "run"

    @property
    def logs_dir(self) -> Path:
        return self.svc_dir / "logs"

    @property
    def monitor_json(self) -> Path:
        return self.run_dir / "monitor.json"

    @property
    def monitor_pid(self) -> Path:
        return self.run_dir / "monitor.pid"

    @property
    def default_cluster_repo(self) -> Path:
        return self.svc_dir / "cluster"

    @property
    def execution_core_dir(self) -> Path:
        return self.svc_dir / "execution-core"

    @property
    def registry_json(self) -> Path:
        return self.execution_core_dir / "registry.json"

    @property
    def execution_core_env(self) -> Path:
        return self.execution_core_dir / "execution-core.env"

    # The provider CLI's interactive login.
    @property
    def login_credentials(self) -> Path:
        override = login_credentials_path(self.environ)
        return _path(override) if override else self.home / ".claude" / ".credentials.json"

    @property
    def login_profile(self) -> Path:
        return self.home / ".claude.json"

    @property
    def zshenv(self) -> Path:
        return self.home / ".zshenv"
