"""What the browser tests check on a rendered page, as JavaScript run in the page.

- overflow(): the page scrolls sideways (document.scrollingElement.scrollWidth > innerWidth)
- contrast_failures(): every visible text node's WCAG 2.1 contrast, computed from
  the rendered styles: the text colour (times the opacity of the element and its
  ancestors) over the effective background, found by compositing the background
  colours of the ancestors from the root down. Large text (24 px, or 18.66 px
  bold) needs 3:1, other text 4.5:1. Disabled controls are exempt (WCAG 1.4.3).
- a11y_failures(): each account card has a heading; each bar is a progressbar
  with aria-valuenow/min/max and a label.
- moving(): elements whose computed transition or animation still moves.
"""
from __future__ import annotations

from typing import Any, Dict, List

_CONTRAST_JS = r"""
function parse(c) {
  var m = c && c.match(/rgba?\(([^)]+)\)/);
  if (!m) return null;
  var p = m[1].split(/[ ,\/]+/).filter(Boolean).map(parseFloat);
  return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
}
function over(top, under) {
  var a = top[3];
  return [top[0] * a + under[0] * (1 - a), top[1] * a + under[1] * (1 - a), top[2] * a + under[2] * (1 - a), 1];
}
function lum(c) {
  var f = function (v) { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
}
function ratio(a, b) { var x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); }
function canvas() {
  var dark = window.matchMedia("(prefers-color-scheme: dark)").matches;
  return dark ? [18, 18, 18, 1] : [255, 255, 255, 1];
}
function background(el) {
  var chain = [];
  for (var n = el; n && n.nodeType === 1; n = n.parentElement) chain.push(n);
  var bg = canvas();
  for (var i = chain.length - 1; i >= 0; i--) {
    var c = parse(getComputedStyle(chain[i]).backgroundColor);
    if (c && c[3] > 0) bg = over(c, bg);
  }
  return bg;
}
function opacity(el) {
  var o = 1;
  for (var n = el; n && n.nodeType === 1; n = n.parentElement) o *= parseFloat(getComputedStyle(n).opacity);
  return o;
}
function visible(el) {
  if (!el.getClientRects().length) return false;
  var s = getComputedStyle(el);
  return s.visibility !== "hidden" && s.display !== "none";
}
var out = [];
var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
while (walker.nextNode()) {
  var t = walker.currentNode, el = t.parentElement;
  if (!el || !t.nodeValue.trim() || !visible(el) || el.closest("[disabled]")) continue;
  var s = getComputedStyle(el);
  var fg = parse(s.color);
  if (!fg) continue;
  var bg = background(el);
  fg[3] *= opacity(el);
  var r = ratio(over(fg, bg), bg);
  var size = parseFloat(s.fontSize), bold = parseInt(s.fontWeight, 10) >= 700;
  var need = (size >= 24 || (size >= 18.66 && bold)) ? 3 : 4.5;
  if (r < need) out.push({text: t.nodeValue.trim().slice(0, 40), ratio: Math.round(r * 100) / 100, need: need,
                          color: s.color, background: "rgb(" + bg.slice(0, 3).map(Math.round).join(",") + ")",
                          cls: el.className && el.className.baseVal === undefined ? el.className : el.tagName});
}
return out;
"""

_A11Y_JS = r"""
var out = [];
document.querySelectorAll("article.card").forEach(function (card) {
  if (!card.querySelector("h1,h2,h3,h4,h5,h6")) out.push("card without a heading: " + card.textContent.slice(0, 40));
});
document.querySelectorAll(".bar").forEach(function (bar) {
  if (!bar.getClientRects().length) return;
  var ok = bar.getAttribute("role") === "progressbar" && bar.hasAttribute("aria-valuenow") &&
           bar.getAttribute("aria-valuemin") === "0" && bar.getAttribute("aria-valuemax") === "100" &&
           (bar.getAttribute("aria-label") || bar.getAttribute("aria-labelledby"));
  if (!ok) out.push("bar without progressbar semantics: " + bar.outerHTML.slice(0, 120));
});
if (!document.querySelector('meta[name="color-scheme"]')) out.push("no color-scheme meta");
return out;
"""

_MOVING_JS = r"""
var out = [];
document.querySelectorAll("*").forEach(function (el) {
  var s = getComputedStyle(el);
  var moves = s.transitionDuration.split(",").some(function (d) { return parseFloat(d) > 0; }) ||
              (s.animationName !== "none" && parseFloat(s.animationDuration) > 0);
  if (moves) out.push(el.tagName + "." + el.className);
});
return out;
"""


def overflow(driver: Any) -> Dict[str, int]:
    return driver.execute_script(
        "return {scroll: document.scrollingElement.scrollWidth, inner: window.innerWidth};")


def contrast_failures(driver: Any) -> List[Dict[str, Any]]:
    return driver.execute_script(_CONTRAST_JS)


def a11y_failures(driver: Any) -> List[str]:
    return driver.execute_script(_A11Y_JS)


def moving(driver: Any) -> List[str]:
    return driver.execute_script(_MOVING_JS)


def emulate(driver: Any, scheme: str, width: int, height: int = 900) -> None:
    """The colour scheme and reduced motion as media features, and the viewport's width."""
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [
        {"name": "prefers-color-scheme", "value": scheme}, {"name": "prefers-reduced-motion", "value": "reduce"}]})
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


def full_screenshot(driver: Any, path: str, width: int) -> None:
    """The whole page at `width` (taller viewport for the shot, then back)."""
    import base64
    height = int(driver.execute_script("return Math.min(4000, document.scrollingElement.scrollHeight);"))
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": max(height, 600), "deviceScaleFactor": 1, "mobile": False})
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})
    with open(path, "wb") as fh:
        fh.write(base64.b64decode(shot["data"]))
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False})


_FOOTER_JS = r"""
var footer = document.getElementById("footer");
if (!footer) return null;
window.scrollTo(0, document.scrollingElement.scrollHeight);
var main = document.querySelector("main").getBoundingClientRect();
var foot = footer.getBoundingClientRect();
var result = {covers: main.bottom > foot.top + 1, position: getComputedStyle(footer).position,
              share: foot.height / window.innerHeight};
window.scrollTo(0, 0);
return result;
"""


def footer_problem(driver: Any, width: int) -> str:
    """Why the dashboard's footer is in the way at `width` ("" when it is not): at the
    end of the page it must not cover the last card, and on a phone it is no fixed bar."""
    found = driver.execute_script(_FOOTER_JS)
    if not found:
        return ""
    if found["covers"]:
        return "the footer covers the end of the page: %s" % found
    if width <= 760 and found["position"] in ("fixed", "sticky"):
        return "the footer stays on a phone's screen: %s" % found
    return ""
