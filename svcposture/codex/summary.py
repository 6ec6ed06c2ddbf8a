"""The Codex accounts' posture (docs/codex.md): the posture body (docs/posture.md) for `?provider=codex`.

Pure derivation from the child's whitelisted `codex` block (the Codex
vendor's `summarize`); the service that schedules the Codex child and serves
the result is the vendor-neutral `posture.service.PostureService`. The body has
the posture shape: `active` is the `CODEX_HOME` account, window objects carry
`derived: true` (the vendor sends no status words), and each account adds
what the vendor reports beyond the contract's fields (`extraWindows`,
`codeReview`, `planType`, `credits`, `resetCredits`, `source`, `sampledAt`, `provider`).

A run that sent no request for an account (the usage floor, another host
polls it, no newer session line) reports the account without windows; the
last outcome seen for that label is shown instead, so the posture does not
blink between polls.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..summary import account_view, disabled_body, posture_body
from .accounts import VENDOR_NAME as CODEX
# What an account keeps of the child's row, beyond the posture fields.
SAMPLE_KEYS = ("fiveHour", "sevenDay", "extraWindows", "codeReview", "planType", "credits", "resetCredits",
               "source", "sampledAt")


# ---------------------------------------------------------------- pure derivation

def _outcome(row: Mapping[str, Any], memory: Mapping[str, Dict[str, Any]]) -> Dict[str, Any]:
    """What to show for one row: its own sample or error, else the last one remembered for its label."""
    if row.get("error") is not None or row.get("source") is not None:
        return {key: row.get(key) for key in SAMPLE_KEYS + ("error",)}
    last = memory.get(row["label"])
    if last is not None:
        return dict(last)
    return {key: row.get(key) for key in SAMPLE_KEYS + ("error",)}


def codex_account_view(row: Mapping[str, Any], memory: Mapping[str, Dict[str, Any]]) -> Dict[str, Any]:
    """One Codex account in the posture account shape plus its vendor fields (pure).

    `row` is a row of the whitelisted `codex` block (codex.report.clean_codex_block).
    """
    return account_view(row, CODEX, _outcome(row, memory))


def codex_summary(block: Optional[Mapping[str, Any]], node: str, probed_at: int,
                  memory: Mapping[str, Dict[str, Any]]) -> Tuple[Dict[str, Any], Dict[str, Dict[str, Any]]]:
    """(the Codex summary, the memory after it) from one whitelisted `codex` block (pure).

    No block (no Codex line), or a block with no usable entry, is the disabled
    body. The memory maps each label still in the file to the last outcome
    (sample or error) it showed.
    """
    if block is None or block.get("available") is not True:
        return disabled_body(node), {}
    views: List[Dict[str, Any]] = []
    kept: Dict[str, Dict[str, Any]] = {}
    for row in block.get("accounts") or []:
        if not isinstance(row, Mapping) or not isinstance(row.get("label"), str) or row["label"] in kept:
            continue
        view = codex_account_view(row, memory)
        kept[row["label"]] = {key: view[key] for key in SAMPLE_KEYS + ("error",)}
        views.append(view)
    probed = block.get("probedAt")
    probed = probed if isinstance(probed, int) and not isinstance(probed, bool) else probed_at
    return posture_body(node, probed, views), kept
