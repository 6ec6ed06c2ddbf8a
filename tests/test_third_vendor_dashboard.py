"""The dashboard shows a vendor it has never heard of (docs/vendors.md), in a real headless Chromium.

The stand-in vendor "acme" (tests/support/thirdvendor/) is registered only by
`SVC_VENDORS=tests.support.thirdvendor` in the node's environment. The page
takes the vendor list and display names from `/api/vendors`, so the node's
Acme accounts get a section of their own ("Acme accounts", its status, its
cards) and an advice line, live over `/api/accounts/stream?provider=acme`,
beside the Claude section; a node with only Acme accounts is no unavailable node;
and a page already open gets the section when the node starts to show the vendor.
"""
from __future__ import annotations

import re
import time

import pytest

from tests.support import pages
from tests.support.browser import chromium, require_chromium, wait_for
from tests.support.home import accounts_path, canary, monitor_env, set_host_name, write_accounts
from tests.support.monitor import start_monitor
from tests.support.provider import ProviderServer
from tests.support.thirdvendor.server import AcmeServer, quota_reply
from tests.support.waiting import wait_until

CLAUDE_TOKEN = canary("acmepage")
KEY_ONE = "acme-key-CANARY-page-one-" + "5" * 16
KEY_TWO = "acme-key-CANARY-page-two-" + "6" * 16
ACME_LINES = ('ACME_KEY_ONE="%s"  # one@acme.example\nACME_KEY_TWO="%s"  # two@acme.example\n'
              'export ACME_KEY="$ACME_KEY_ONE"\n' % (KEY_ONE, KEY_TWO))

# Everything the page shows of each vendor, read in one script (every frame redraws the cards).
SECTIONS = r"""
return Array.prototype.map.call(document.querySelectorAll('#vendors > section'), function (s) {
  var title = s.querySelector('h2');
  return {id: s.id, shown: !s.hidden, titleShown: !!title && !title.hidden && title.offsetParent !== null,
          title: title ? title.textContent.replace(/\s+/g, ' ').trim() : null,
          cards: Array.prototype.map.call(s.querySelectorAll('article.card'), function (c) {
            return {label: c.getAttribute('data-label'), text: c.textContent,
                    pct: (c.querySelector('[data-window="fiveHour"] .win-pct') || {}).textContent}; })};
});
"""
ADVICE = r"""
return Array.prototype.map.call(document.querySelectorAll('#advice .advice-line'), function (p) {
  return {id: p.id, hidden: p.hidden, text: p.textContent};
});
"""


def _node(root, provider, acme, claude=True):
    home = root / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "acme-page")
    entries = [("ACCT1", CLAUDE_TOKEN, "c@x.example")] if claude else []
    write_accounts(accounts_path(home), entries, active="ACCT1" if claude else None, extra=ACME_LINES)
    env = monitor_env(home, provider.url, SVC_ACME_URL=acme.url, SVC_PROBE_INTERVAL_S="1", SVC_POSTURE_TTL_S="1",
                      SVC_VENDORS="tests.support.thirdvendor")
    mon = start_monitor(env)
    wait_until(lambda: (mon.get_json("/api/accounts?provider=acme")[1].get("active") or {}).get("label"), 30,
               message="the acme posture")
    return mon


@pytest.fixture(scope="module")
def servers():
    require_chromium()
    reset_5h, reset_7d = int(time.time()) + 3600, int(time.time()) + 4 * 86400
    with ProviderServer() as provider, AcmeServer() as acme:
        provider.set_account(CLAUDE_TOKEN, five_hour=(0.30, "allowed"), seven_day=(0.10, "allowed"))
        acme.set_reply(KEY_ONE, quota_reply(0.42, 0.20, reset_5h, reset_7d))
        acme.set_reply(KEY_TWO, quota_reply(0.60, 0.05, reset_5h, reset_7d))
        yield provider, acme, (reset_5h, reset_7d)


@pytest.fixture(scope="module")
def driver():
    with chromium(1280, 900) as d:
        yield d


def test_the_dashboard_shows_the_third_vendors_section_and_advice(servers, driver, tmp_path):
    provider, acme, (reset_5h, reset_7d) = servers
    mon = _node(tmp_path, provider, acme)
    try:
        for width in (360, 1280):
            pages.emulate(driver, "light", width)
            driver.get(mon.url + "/")
            # Each vendor's stream brings its own first frame: the Acme cards and the Claude section both.
            found = wait_for(lambda: (lambda s: s if any(x["id"] == "vendor-acme" and len(x["cards"]) == 2
                                                         for x in s) and any(x["id"] == "vendor-claude" and x["shown"]
                                                                             for x in s) else None)(
                driver.execute_script(SECTIONS)), timeout=30, what="the Acme section with its two cards, and Claude's")
            # One section per registered vendor, in the API's order; only Claude and Acme have accounts here.
            assert [s["id"] for s in found] == ["vendor-claude", "vendor-codex", "vendor-copilot", "vendor-zai",
                                                "vendor-kimi", "vendor-acme"]
            claude, acme_section = found[0], found[-1]
            assert claude["shown"] and acme_section["shown"] and not any(s["shown"] for s in found[1:-1])
            # Two vendors on the page: each section says whose accounts it holds, and its status.
            assert acme_section["titleShown"] and acme_section["title"] == "Acme accounts ok"
            assert claude["titleShown"] and claude["title"].startswith("Claude accounts")
            assert [c["label"] for c in acme_section["cards"]] == ["acme-one", "acme-two"]
            assert [c["pct"] for c in acme_section["cards"]] == ["42%", "60%"]
            assert "one@acme.example" in acme_section["cards"][0]["text"]
            assert [c["label"] for c in claude["cards"]] == ["acct1"]
            # The advice, for each vendor present, in the same order, each naming its vendor.
            shown_ids = ("advice-claude", "advice-acme")
            lines = wait_for(lambda: (lambda a: a if all(not x["hidden"] for x in a if x["id"] in shown_ids)
                                      else None)(driver.execute_script(ADVICE)), what="both advice lines")
            assert [x["id"] for x in lines] == ["advice-claude", "advice-codex", "advice-copilot", "advice-zai",
                                                "advice-kimi", "advice-acme"]
            acme_line = lines[-1]["text"]
            assert re.match(r"Acme: Stay on acme-one\b", acme_line), acme_line
            assert lines[0]["text"].startswith("Claude: ") and all(x["hidden"] for x in lines[1:-1])
            assert mon.get_json("/api/advice?provider=acme")[1]["active"]["label"] == "acme-one"
            text = driver.execute_script("return document.body.innerText")
            assert "codex" not in text.lower() and "CANARY" not in driver.page_source
            assert not driver.find_element("id", "unavailable").is_displayed()
            size = pages.overflow(driver)
            assert size["scroll"] <= size["inner"], (width, size)
            assert not pages.a11y_failures(driver) and not pages.contrast_failures(driver)

        # A new reading of the acme accounts reaches the page without a reload (a re-read at the push
        # of the trajectory stream: the page streams the default vendor's posture alone).
        acme.set_reply(KEY_ONE, quota_reply(0.55, 0.20, reset_5h, reset_7d))
        driver.execute_script("window.__sameDocument = 'yes';")
        wait_for(lambda: [c["pct"] for c in [s for s in driver.execute_script(SECTIONS)
                                             if s["id"] == "vendor-acme"][0]["cards"]][0] == "55%",
                 timeout=30, what="acme-one at 55% without a reload")
        assert driver.execute_script("return window.__sameDocument;") == "yes"
        errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        assert not errors, errors
    finally:
        acme.set_reply(KEY_ONE, quota_reply(0.42, 0.20, reset_5h, reset_7d))
        mon.stop()


def test_a_node_with_only_the_third_vendors_accounts_is_not_unavailable(servers, driver, tmp_path):
    provider, acme, _ = servers
    mon = _node(tmp_path, provider, acme, claude=False)
    try:
        pages.emulate(driver, "dark", 1280)
        driver.get(mon.url + "/")
        found = wait_for(lambda: (lambda s: s if any(x["id"] == "vendor-acme" and len(x["cards"]) == 2
                                                     for x in s) else None)(driver.execute_script(SECTIONS)),
                         timeout=30, what="the Acme section")
        shown = [s for s in found if s["shown"]]
        # Alone on the page, a vendor other than the default keeps its heading: its status is there,
        # the footer being the default vendor's.
        assert [s["id"] for s in shown] == ["vendor-acme"] and shown[0]["titleShown"]
        assert shown[0]["title"] == "Acme accounts ok"
        line = wait_for(lambda: driver.find_element("id", "advice-acme").text, what="the acme advice")
        # One vendor on the page: its sentence needs no vendor's name.
        assert line.startswith("Stay on acme-one"), line
        assert not driver.find_element("id", "unavailable").is_displayed()
        assert driver.find_element("id", "footer-label").text == "no account"
        assert not pages.contrast_failures(driver)
    finally:
        mon.stop()


def test_a_vendor_the_node_starts_to_show_gets_its_section_without_a_reload(servers, driver, tmp_path):
    provider, acme, _ = servers
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    set_host_name(home, "acme-later")
    write_accounts(accounts_path(home), [("ACCT1", CLAUDE_TOKEN, "c@x.example")], active="ACCT1")
    env = monitor_env(home, provider.url, SVC_ACME_URL=acme.url, SVC_PROBE_INTERVAL_S="1", SVC_POSTURE_TTL_S="1",
                      SVC_VENDORS="tests.support.thirdvendor")
    mon = start_monitor(env)
    try:
        pages.emulate(driver, "light", 1280)
        driver.get(mon.url + "/")
        found = wait_for(lambda: (lambda s: s if any(x["id"] == "vendor-claude" and x["cards"] for x in s) else None)(
            driver.execute_script(SECTIONS)), timeout=30, what="the Claude section")
        assert [s["id"] for s in found if s["shown"]] == ["vendor-claude"]
        assert not [s for s in found if s["shown"]][0]["titleShown"]  # one vendor, the default: no heading
        driver.execute_script("window.__sameDocument = 'yes';")
        write_accounts(accounts_path(home), [("ACCT1", CLAUDE_TOKEN, "c@x.example")], active="ACCT1",
                       extra=ACME_LINES)
        # The trajectory names acme's accounts after its first probe: the page reads the vendors again.
        found = wait_for(lambda: (lambda s: s if any(x["id"] == "vendor-acme" and len(x["cards"]) == 2
                                                     for x in s) else None)(driver.execute_script(SECTIONS)),
                         timeout=30, what="the Acme section, without a reload")
        assert [s["id"] for s in found if s["shown"]] == ["vendor-claude", "vendor-acme"]
        assert all(s["titleShown"] for s in found if s["shown"])
        assert driver.execute_script("return window.__sameDocument;") == "yes"
        wait_for(lambda: driver.find_element("id", "advice-acme").text.startswith("Acme: Stay on acme-one"),
                 what="the acme advice line")
    finally:
        mon.stop()
