"""The Codex summary (codex.summary.codex_summary), pure: the posture body's shape from the child's block,
the last outcome kept across runs that sent nothing, and hostile blocks."""
from __future__ import annotations

from svcposture.codex.report import clean_codex_block
from svcposture.codex.summary import codex_summary
from svcposture.vendors import is_account_label, provider_from_query, provider_of_label

W = {"pct": 92.0, "resetsAt": "2026-01-01T00:00:00.000Z", "status": "allowed_warning", "derived": True}
LOW = {"pct": 10.0, "resetsAt": None, "status": "allowed", "derived": True}


def row(label, active=False, source="api", five=W, seven=LOW, error=None, sampled=1_800_000_000_000):
    return {"label": label, "email": label[6:] + "@x.example", "active": active, "provider": "codex",
            "source": source, "sampledAt": sampled if source else None, "polledAt": None, "skipped": None,
            "pollOwner": None, "accountKey": None, "fiveHour": five if source else None,
            "sevenDay": seven if source else None, "extraWindows": [], "codeReview": None, "planType": "pro",
            "credits": None, "retryAfterS": None, "error": error}


def block(*rows, active="codex-a"):
    return clean_codex_block({"available": True, "probedAt": 1_800_000_000_500, "active": active,
                              "duplicateActive": [], "unusable": [], "accounts": list(rows)})


def test_the_summary_has_the_posture_shape_and_derived_statuses():
    summary, memory = codex_summary(block(row("codex-a", True), row("codex-b", five=LOW)), "n", 1, {})
    assert list(summary) == ["available", "node", "probedAt", "status", "active", "accounts", "siblingWithHeadroom"]
    assert summary["probedAt"] == 1_800_000_000_500 and summary["status"] == "degraded"
    assert summary["active"]["label"] == "codex-a" and summary["active"]["bindingWindow"] == "five_hour"
    assert summary["siblingWithHeadroom"] == {"label": "codex-b", "email": "b@x.example"}
    assert summary["accounts"][0]["fiveHour"]["derived"] is True and set(memory) == {"codex-a", "codex-b"}


def test_a_run_that_sent_nothing_shows_the_last_outcome():
    _, memory = codex_summary(block(row("codex-a", True)), "n", 1, {})
    summary, memory = codex_summary(block(row("codex-a", True, source=None)), "n", 2, memory)
    assert summary["active"]["fiveHour"]["pct"] == 92.0 and summary["active"]["source"] == "api"
    error = {"kind": "unauthorized", "message": "The Codex login's token was refused or has expired.",
             "httpStatus": 401, "fix": "run `codex login` with CODEX_HOME=/h/a"}
    summary, memory = codex_summary(block(row("codex-a", True, source=None, error=error)), "n", 3, memory)
    assert summary["status"] == "error" and summary["active"]["fiveHour"] is None
    assert summary["active"]["error"]["fix"].startswith("run `codex login`")
    # The error is the last outcome now: a later run that sent nothing still shows it.
    summary, _ = codex_summary(block(row("codex-a", True, source=None)), "n", 4, memory)
    assert summary["status"] == "error"
    # A label gone from the file is forgotten.
    _, memory = codex_summary(block(row("codex-b", source=None), active=None), "n", 5, memory)
    assert set(memory) == {"codex-b"}


def test_no_block_or_no_usable_login_is_the_disabled_body():
    assert codex_summary(None, "n", 1, {}) == ({"available": False, "node": "n"}, {})
    assert codex_summary(clean_codex_block({"available": False, "accounts": []}), "n", 1, {})[0] == \
        {"available": False, "node": "n"}
    for hostile in ([], "x", {"available": True, "accounts": [{"label": "acct1"}, {"label": "codex-"}, 7]}):
        summary, _ = codex_summary(clean_codex_block(hostile), "n", 1, {})
        assert summary == {"available": False, "node": "n"}


def test_vendor_words():
    assert provider_of_label("codex-a") == "codex" and provider_of_label("codex") == "claude"
    assert provider_of_label(None) == "claude"
    assert is_account_label("codex-a_1") and is_account_label("acct2")
    assert not is_account_label("codex-A") and not is_account_label("a-b") and not is_account_label("codex-")
    assert not is_account_label("codex-a\n") and not is_account_label("acct1\n")
    assert provider_from_query("refresh=true") == ("claude", None)
    assert provider_from_query("provider=codex")[0] == "codex"
    assert provider_from_query("provider=co%64ex")[0] == "codex"
    for bad in ("provider=", "provider", "provider=codex&provider=claude", "provider=%zz", "provider=%ff",
                "provider=" + "x" * 5000):
        assert provider_from_query(bad)[0] is None, bad
