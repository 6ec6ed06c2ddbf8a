"""Where a Claude token comes from, as `svc-monitor init` writes and says it (docs/first-look.md).

A token that lasts a year comes from `claude setup-token`, run signed in as
the account; it prints an `sk-ant-oat01-...` token to paste over the
placeholder of the account's `MODEL_TOKEN_<SUFFIX>=` line.
"""
from __future__ import annotations

from ..envfile.entries import PLACEHOLDER, PLACEHOLDER_EMAIL
from ..vendor import SetupHelp
from .accounts import ACCOUNT_TOKEN_PREFIX, LINES

SETUP_HELP = SetupHelp(
    next_step="for each Claude account: run `claude setup-token` signed in as it (it prints sk-ant-oat01-...)",
    comment=(
        "# To get a Claude token that lasts a year: run `claude setup-token` signed in as that account,",
        "# and paste the sk-ant-oat01-... it prints.",
    ),
    example=(
        "# Claude accounts (optional): one line per account. To get a token that lasts a year, run",
        "# `claude setup-token` signed in as that account and paste the sk-ant-oat01-... it prints.",
        "# %sWORK=%s  # %s" % (ACCOUNT_TOKEN_PREFIX, PLACEHOLDER, PLACEHOLDER_EMAIL),
        "# " + LINES.export_line("WORK"),
    ),
    renew="run `claude setup-token` signed in as {who} and paste it into {where}",
)
