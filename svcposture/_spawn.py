"""How the package starts Python children of itself, vendored or not.

A vendored copy is imported as e.g. `hostpkg._vendor.svcposture`; its children
must run that copy (`python -m hostpkg._vendor.svcposture.probe`), found through
PYTHONPATH, and must never inherit a token from the caller's environment.
"""
from __future__ import annotations

import os
import signal
import sys
from typing import Dict, List, Mapping

from .vendors import registered

CLOUD_TOKEN_VAR = "SVC_CLOUD_TOKEN"

# This module sits at the package's top level, so its parent is the package.
PACKAGE = __name__.rpartition(".")[0]


def import_root() -> str:
    """The directory to put on sys.path so that PACKAGE imports: one level up per dotted part."""
    root = os.path.dirname(os.path.abspath(__file__))
    for _ in PACKAGE.split("."):
        root = os.path.dirname(root)
    return root


def is_token_var(name: str) -> bool:
    """The cloud token, or any registered vendor's account or active variable (MODEL_TOKEN_*, CODEX_HOME, ...)."""
    return name == CLOUD_TOKEN_VAR or any(vendor.lines.owns_var(name) for vendor in registered())


def without_tokens(environ: Mapping[str, str]) -> Dict[str, str]:
    """A copy of `environ` with no cloud token and no variable of any vendor's lines: which
    accounts a child probes, and which one is active, is the accounts env file's say alone."""
    return {k: v for k, v in environ.items() if not is_token_var(k)}


def child_env(environ: Mapping[str, str], **extra: str) -> Dict[str, str]:
    """`environ` without tokens, with this copy of the package importable, plus `extra`.

    `extra` is set last, so a caller's own variables (PYTHON, SVC_ACCOUNTS_ENV
    for the probe child) win over anything inherited.
    """
    env = without_tokens(environ)
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = import_root() + (os.pathsep + existing if existing else "")
    env.update(extra)
    return env


def module_command(submodule: str = "", *args: str) -> List[str]:
    """`python -m <PACKAGE>[.submodule] args...` with the running interpreter."""
    module = PACKAGE + ("." + submodule if submodule else "")
    return [sys.executable or "python3", "-m", module] + list(args)


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by `pid` (a child started with
    start_new_session=True), so that whatever it started dies with it.

    A group already gone, or one we may no longer signal, is left alone: the
    caller reaps the child either way.
    """
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
