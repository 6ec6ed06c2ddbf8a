"""Every on-disk location, derived from $HOME so that tests can relocate a node."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Optional

from ._home import HomeError, home_of

__all__ = ["HomeError", "Paths", "home_of"]


class Paths:
    """The locations of one node. Nothing is created or read here."""

    def __init__(self, home: "Optional[os.PathLike[str] | str]" = None,
                 environ: Optional[Mapping[str, str]] = None) -> None:
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        if home is None:
            home = home_of(self.environ)
        self.home = Path(home)

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
        override = self.environ.get("SVC_ACCOUNTS_ENV")
        return Path(override) if override else self.config_dir / "model-accounts.env"

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
        override = self.environ.get("SVC_LOGIN_CREDENTIALS")
        return Path(override) if override else self.home / ".claude" / ".credentials.json"

    @property
    def login_profile(self) -> Path:
        return self.home / ".claude.json"

    @property
    def zshenv(self) -> Path:
        return self.home / ".zshenv"
