"""GitHub Copilot as the registry holds it (docs/copilot.md).

An account is `COPILOT_TOKEN_<NAME>=<GitHub token>  # <email>`, the active one
`export COPILOT_GITHUB_TOKEN="$COPILOT_TOKEN_<NAME>"` (the variable GitHub's own Copilot CLI
reads), its label `copilot-<name>`. The child sends `GET {SVC_COPILOT_URL}/copilot_internal/user`
with `Authorization: token <t>`, the scheme GitHub's REST API documents and the editors send
(the endpoint takes `Bearer` too).
"""
from ..keyvendor.vendor import KeyVendor

VENDOR = KeyVendor(__package__, "copilot", "Copilot", lines=("COPILOT_TOKEN_", "COPILOT_GITHUB_TOKEN"),
                   url=("SVC_COPILOT_URL", "https://api.github.com"), request=("/copilot_internal/user", "token"))
