"""Codex's own knobs (docs/settings.md): the usage endpoint's base URL, and the monitor's message to its child.

Declared here, listed in the vendor's `knobs`, and read only through
`settings.knob_value`: in the monitor through Settings, in the probe child
from the environment it is given.
"""
from __future__ import annotations

from ..settings import as_base_url, as_text
from ..vendor import Knob

DEFAULT_CODEX_URL = "https://chatgpt.com"

CODEX_URL = Knob("SVC_CODEX_URL", DEFAULT_CODEX_URL,
                 "the base URL the usage request goes to (GET /backend-api/wham/usage)", as_base_url)
# Set by the monitor for each child it starts (codex/state.py): what it remembers of each login.
STATE = Knob("SVC_CODEX_STATE", "",
             "set by the monitor for its probe child: the roster, live hosts and each login's newest sample",
             as_text, internal=True)

KNOBS = (CODEX_URL, STATE)
