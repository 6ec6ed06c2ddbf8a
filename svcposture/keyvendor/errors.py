"""A key vendor's fixed error vocabulary (docs/vendors.md), and the health each error means.

Every key vendor's errors have the same kinds and, but for one, the same sentences with the
vendor's display name in them: built here once. What is the vendor's own is the sentence for a
refused key (a GitHub token without a Copilot seat is not a revoked z.ai key) and the fix shown
with it. An error is `{"kind", "message", "httpStatus", "fix", "retryAt"}`: a sentence of its
kind, the HTTP status, the fix (refused keys only) and, for a rate limit whose reply said when
it lifts, that instant. Nothing else (no reply text, no exception text) can ride along.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Mapping, Optional

from ..errors import Sentences, Vocabulary

KINDS = ("unauthorized", "rate_limited", "transport", "timeout", "http", "parse", "internal")
_ISO_MS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
# The account health (docs/posture.md) each kind means; any other kind means none.
HEALTH = {"unauthorized": "refused", "rate_limited": "limited", "transport": "unreachable",
          "timeout": "unreachable"}


class KeyErrors:
    """One key vendor's vocabulary: `display_name` goes into the common sentences, `refused` is
    its sentence for a key the endpoint refused (401/403), `fix` what the operator does then."""

    def __init__(self, display_name: str, refused: str, fix: str) -> None:
        endpoint = "The %s usage endpoint" % display_name
        self.fix = fix
        self.messages: Dict[str, Sentences] = {
            "unauthorized": Sentences(refused=refused),
            "rate_limited": Sentences(limited=endpoint + " is rate limiting this key."),
            "transport": Sentences(unreachable=endpoint + " could not be reached."),
            "timeout": Sentences(no_answer=endpoint + " did not answer in time.",
                                 sweep_deadline="The %s probe did not finish before the sweep deadline."
                                                % display_name),
            "http": Sentences(unexpected_status=endpoint + " answered with an unexpected HTTP status."),
            "parse": Sentences(unreadable="The %s usage reply could not be read." % display_name),
            "internal": Sentences(no_result="The %s probe failed without a result." % display_name),
        }
        self.vocabulary = Vocabulary(self.messages)

    def error(self, kind: str, message: Optional[str] = None, http_status: Optional[int] = None,
              retry_at: Optional[str] = None) -> Dict[str, Any]:
        """An error in the vocabulary; a message outside it falls back to its kind's first sentence."""
        built = self.vocabulary.error(kind, message, http_status)
        fix = self.fix if built["kind"] == "unauthorized" else None
        return dict(built, fix=fix, retryAt=retry_at if built["kind"] == "rate_limited" else None)

    def clean(self, value: Any) -> Optional[Dict[str, Any]]:
        """An error someone else built (the child's JSON), whitelisted into the vocabulary; None stays None."""
        clean = self.vocabulary.clean(value)
        if clean is None:
            return None
        retry = value.get("retryAt") if isinstance(value, Mapping) else None
        retry = retry if isinstance(retry, str) and _ISO_MS_RE.match(retry) else None
        return self.error(clean["kind"], clean["message"], clean["httpStatus"], retry)


def health_of(error: Any) -> Optional[str]:
    """The account health one of these errors means: refused, limited or unreachable; else None."""
    return HEALTH.get(error.get("kind")) if isinstance(error, Mapping) else None
