"""Claude's own knobs (docs/settings.md): the provider's base URL and the header probe's model.

Declared here, listed in the vendor's `knobs`, and read only through
`settings.knob_value`: in the monitor through Settings, in the probe child
from the environment it is given.
"""
from __future__ import annotations

from ..settings import as_base_url, as_text
from ..vendor import Knob

DEFAULT_PROVIDER_URL = "https://api.anthropic.com"
# The cheapest model: a header probe asks for one token of it.
DEFAULT_PROBE_MODEL = "claude-haiku-4-5-20251001"

PROVIDER_URL = Knob("SVC_PROVIDER_URL", DEFAULT_PROVIDER_URL,
                    "the provider's base URL: the header probe and the usage probe go there", as_base_url)
PROBE_MODEL = Knob("SVC_PROBE_MODEL", DEFAULT_PROBE_MODEL,
                   "the model the header probe asks one token of", as_text)

KNOBS = (PROVIDER_URL, PROBE_MODEL)
