"""A page whose monitor stopped answering, in a real browser (Debian chromium through selenium).

The demo's dashboard and fleet are open when the demo is stopped. After three failed
reconnects each page says that its monitor stopped answering (and since when), greys
its advice (the dashboard's advice box and banner, the fleet's alarms and pills) by
colour, so every text keeps WCAG AA contrast (and axe-core finds nothing), and keeps what it showed. Screenshots
at 360 and 1280 px in both colour schemes go to $SVC_SCREENSHOT_DIR (else a temporary
folder), whose path is printed.
"""
from __future__ import annotations

import os
import re
import tempfile

from tests.support import pages
from tests.support.browser import axe_run, axe_script, chromium, require_chromium, wait_for
from tests.support.firstlook import Demo

WIDTHS = (360, 1280)
SCHEMES = ("light", "dark")
DASHBOARD_DRAWN = ("return document.querySelectorAll('#claude-cards article.card').length >= 3 && "
                   "!document.getElementById('advice').hidden")
FLEET_DRAWN = "return document.querySelectorAll('#rows .row').length >= 5"
# What the page says, and how it greys: the advice's colour is the muted one, not the alarm's.
STOPPED_JS = {
    "dashboard": """
        var note = document.getElementById('stopped'), line = document.querySelector('#advice .advice-line');
        var muted = getComputedStyle(document.querySelector('.muted') || document.body).color;
        return {shown: !note.hidden, text: note.textContent,
                greyed: document.body.classList.contains('monitor-stopped'),
                adviceColour: line ? getComputedStyle(line).color : null, muted: muted,
                conn: document.getElementById('conn').textContent,
                cards: document.querySelectorAll('#claude-cards article.card').length};""",
    "fleet": """
        var note = document.getElementById('notice'), alarm = document.querySelector('.wall.alarm');
        var muted = getComputedStyle(document.querySelector('.muted')).color;
        return {shown: !note.hidden, text: note.textContent,
                greyed: document.body.classList.contains('monitor-stopped'),
                adviceColour: alarm ? getComputedStyle(alarm).color : null, muted: muted, conn: null,
                cards: document.querySelectorAll('#rows .row').length};""",
}


def _shots() -> str:
    folder = os.environ.get("SVC_SCREENSHOT_DIR") or tempfile.mkdtemp(prefix="svc-screenshots-")
    os.makedirs(folder, exist_ok=True)
    print("\nscreenshots in %s" % folder)
    return folder


def _stopped(driver, name):
    state = driver.execute_script(STOPPED_JS[name])
    return state if state["shown"] and "stopped answering" in state["text"] else None


def test_a_page_whose_monitor_stopped_says_so_and_greys_its_advice(tmp_path):
    require_chromium()
    axe_script()
    shots = _shots()
    demo = Demo(tmp_path / "home", ["--port", "0"]).wait_ready()
    problems = []
    try:
        with chromium(1280, 900) as driver:
            pages.emulate(driver, "light", 1280)
            driver.get(demo.url + "/")
            wait_for(lambda: driver.execute_script(DASHBOARD_DRAWN), timeout=60, what="the dashboard drawn")
            dashboard = driver.current_window_handle
            driver.switch_to.new_window("tab")
            pages.emulate(driver, "light", 1280)
            driver.get(demo.url + "/fleet")
            wait_for(lambda: driver.execute_script(FLEET_DRAWN), timeout=60, what="the fleet drawn")
            fleet = driver.current_window_handle
            # While the monitor answers, neither page says anything of the kind.
            assert _stopped(driver, "fleet") is None
            assert demo.stop() == 0
            for name, handle in (("fleet", fleet), ("dashboard", dashboard)):
                driver.switch_to.window(handle)
                state = wait_for(lambda: _stopped(driver, name), timeout=90, what="%s saying it stopped" % name)
                failed = re.search(r"after (\d+) failed", state["text"])
                assert state["greyed"] and failed and int(failed.group(1)) >= 3, state
                assert state["adviceColour"] == state["muted"], state  # greyed, by colour
                assert state["cards"] >= 3, state  # the last reading stays on the page
                if name == "dashboard":
                    assert state["conn"] == "stopped", state
                for scheme in SCHEMES:
                    for width in WIDTHS:
                        pages.emulate(driver, scheme, width)
                        wait_for(lambda: driver.execute_script("return window.innerWidth") == width, what="resize")
                        where = "%s stopped %s %dpx" % (name, scheme, width)
                        problems.extend("%s contrast: %s" % (where, f) for f in pages.contrast_failures(driver))
                        audit = axe_run(driver)
                        problems.extend("%s axe: %s" % (where, v) for v in audit.get("violations", [audit]))
                        size = pages.overflow(driver)
                        if size["scroll"] > size["inner"]:
                            problems.append("%s scrolls sideways: %s" % (where, size))
                        shot = os.path.join(shots, "%s-stopped-%d-%s.png" % (name, width, scheme))
                        pages.full_screenshot(driver, shot, width)
    finally:
        demo.stop()
    assert not problems, "\n".join(problems[:40])
