"""Where a Codex login comes from, as `svc-monitor init` writes and says it (docs/codex.md).

A login is a CODEX_HOME directory that `codex login` wrote its auth.json
into; the account's line names that directory. The example is commented out:
a node without Codex shows nothing about it, and the directory must be a real
login.
"""
from __future__ import annotations

from ..envfile.entries import PLACEHOLDER_EMAIL
from ..vendor import SetupHelp
from .accounts import ACTIVE_HOME_VAR, CODEX_HOME_PREFIX, LINES

SETUP_HELP = SetupHelp(
    next_step="for a Codex login: %s=<dir> codex login" % ACTIVE_HOME_VAR,
    comment=(
        "# To get a Codex login: mkdir -p ~/.codex-work && CODEX_HOME=~/.codex-work codex login,",
        "# and name that directory on the account's line.",
    ),
    example=(
        "# Codex logins (optional): one line per login, naming the CODEX_HOME directory `codex login`",
        "# wrote auth.json into; the probe child reads it there. The active one is what CODEX_HOME names.",
        "# To get one: mkdir -p ~/.codex-work && CODEX_HOME=~/.codex-work codex login",
        '# %sWORK="$HOME/.codex"  # %s' % (CODEX_HOME_PREFIX, PLACEHOLDER_EMAIL),
        "# " + LINES.export_line("WORK"),
    ),
    renew="run `codex login` with CODEX_HOME set to the directory on {where}",
)
