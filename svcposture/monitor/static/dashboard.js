// svc-monitor dashboard: live from the default vendor's /api/accounts/stream and /api/trajectory/stream
// (each other vendor's posture re-read at every trajectory push),
// no build step, no CDN, SVG drawn by hand.
// Everything is written with textContent: emails and labels are never parsed as HTML.
// The page names no vendor: the list, its order and the display names come from /api/vendors.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var HOUR = 3600000;
  var WINDOWS = [
    // field, short name, bar id, sparkline span
    { field: "fiveHour", name: "5h", bar: "5h", span: 24 * HOUR, words: "5-hour window" },
    { field: "sevenDay", name: "7d", bar: "7d", span: 7 * 24 * HOUR, words: "7-day window" }
  ];
  // The provider's window names as people say them.
  var WINDOW_WORDS = { five_hour: "5-hour window", seven_day: "7-day window",
                       seven_day_opus: "7-day Opus window", seven_day_sonnet: "7-day Sonnet window" };
  var LOGIN_POLL_MS = 60000;
  // The vendor list is read again now and then, so that a vendor the node starts to show gets its section.
  var VENDORS_POLL_MS = 60000, VENDORS_AGAIN_MS = 5000;
  var vendors = [];         // [{name, displayName, shown}] from /api/vendors, in its order
  var defaultName = null;   // the vendor /api/accounts serves without ?provider: the footer and banner are its
  var vendorsFetched = 0;
  var postures = {};        // vendor name -> its newest posture body
  var sections = {};        // vendor name -> the elements of its section and advice line
  var last = null;          // the default vendor's newest posture body (the contract's footer and banner)
  var login = null;         // newest /api/login body, shown while the default vendor's posture is unavailable
  var loginFetched = 0;
  var traj = null;          // newest trajectory body
  var history = { fiveHour: {}, sevenDay: {} };  // label -> [[t, pct], ...]
  var historyFetched = 0;
  var alertsSeen = {};
  var sources = {};
  var reconnectTimers = {};
  var probeIntervalMs = 300000;

  function $(id) { return document.getElementById(id); }
  function text(id, value) { $(id).textContent = value == null ? "" : String(value); }
  function el(tag, cls, content) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (content != null) node.textContent = String(content);
    return node;
  }
  function svgEl(tag, attrs) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    return node;
  }

  // ------------------------------------------------------------ formatting

  function fmtPct(p) {
    // One rule on every surface (the terminals' too): to the nearest tenth, halves up, a trailing
    // ".0" dropped, none below 0, and past the limit "100%+" (the exact figure says nothing more,
    // and "101%" reads as a bug).
    if (typeof p !== "number" || !isFinite(p)) return "no reading";
    return p > 100 ? "100%+" : (Math.round(Math.max(0, p) * 10) / 10) + "%";
  }
  function windowWords(name) { return WINDOW_WORDS[name] || String(name).replace(/_/g, " ") + " window"; }
  function setProgress(bar, pct, label) {
    // A bar is a progressbar with its value: screen readers read "acct1 5-hour window, 42%".
    var value = typeof pct === "number" ? Math.max(0, Math.min(100, pct)) : 0;
    bar.setAttribute("role", "progressbar");
    bar.setAttribute("aria-valuemin", "0");
    bar.setAttribute("aria-valuemax", "100");
    bar.setAttribute("aria-valuenow", String(Math.round(value * 10) / 10));
    bar.setAttribute("aria-valuetext", typeof pct === "number" ? fmtPct(pct) : "no data");
    bar.setAttribute("aria-label", label);
  }
  function fmtDuration(ms) {
    // One way on every page and terminal: "2d 6h", "1h 58m", "7m 5s", "30s" (a zero second part is left out).
    if (ms <= 0) return "now";
    var s = Math.floor(ms / 1000), d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600),
        m = Math.floor(s % 3600 / 60), sec = s % 60;
    if (d > 0) return d + "d" + (h ? " " + h + "h" : "");
    if (h > 0) return h + "h" + (m ? " " + m + "m" : "");
    if (m > 0) return m + "m" + (sec ? " " + sec + "s" : "");
    return sec + "s";
  }
  function localClock(t) {
    var date = new Date(t);
    var hm = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    if (t - Date.now() > 20 * HOUR) {
      return date.toLocaleDateString([], { weekday: "short" }) + " " + hm;
    }
    return hm;
  }
  function countdown(iso) {
    if (!iso) return "";
    var t = Date.parse(iso);
    if (isNaN(t)) return "";
    var left = t - Date.now();
    // A window past its reset, not yet re-probed, "resets now", not "in now".
    // No-break spaces inside the duration and the clock: a narrow line wraps between them, never mid-time.
    var nb = function (words) { return words.replace(/ /g, "\u00a0"); };
    return (left > 0 ? "resets in " + nb(fmtDuration(left)) : "resets now") + " (" + nb(localClock(t)) + ")";
  }
  function windowText(w) {
    if (!w) return "no reading";
    var c = countdown(w.resetsAt);
    return fmtPct(w.pct) + (c ? " · " + c : "");
  }
  function isStale(probedAt) {
    return typeof probedAt === "number" && Date.now() - probedAt > 2 * probeIntervalMs;
  }
  function readingWords(probedAt) {
    // "last reading 2m 5s ago (02:10:03) · a new one every 5m", or, past twice the interval,
    // "no new reading for 12m (readings every 5m)": the threshold is in the words.
    if (typeof probedAt !== "number") return "";
    var age = fmtDuration(Date.now() - probedAt), every = fmtDuration(probeIntervalMs);
    if (isStale(probedAt)) return "No new reading for " + age + " (readings every " + every + ")";
    return "Last reading " + age + " ago (" + new Date(probedAt).toLocaleTimeString() + ") · a new one every " + every;
  }

  function forecastSentence(w) {
    var f = w && w.forecast;
    if (!f) return { text: "Forecast: not enough readings yet.", alarm: false };
    var wall = f.wallAt ? Date.parse(f.wallAt) : NaN;
    var reset = w.resetsAt ? Date.parse(w.resetsAt) : NaN;
    if (f.beforeReset && !isNaN(wall)) {
      var toWall = wall - Date.now();
      var head = toWall <= 0 ? "Forecast: at 100% now" : "Forecast: 100% in " + fmtDuration(toWall) + " (" + localClock(wall) + ")";
      return { text: head + (isNaN(reset) ? "" : ", " + fmtDuration(reset - wall) + " before it resets"), alarm: true };
    }
    if (typeof f.pctAtReset === "number") {
      var rate = typeof f.ratePctPerHour === "number" ? f.ratePctPerHour : 0;
      return { text: "Forecast: about " + fmtPct(f.pctAtReset) + " when it resets (" +
               (rate >= 0.05 ? "rising " + rate + "% an hour)" : "steady)"), alarm: false };
    }
    if (!isNaN(wall)) return { text: "Forecast: 100% in " + fmtDuration(wall - Date.now()), alarm: false };
    return { text: "Forecast: not rising.", alarm: false };
  }

  // ------------------------------------------------------------ footer and banner (the contract's)

  function setBar(key, w) {
    var fill = $("bar-" + key + "-fill");
    var pct = w && typeof w.pct === "number" ? Math.max(0, Math.min(100, w.pct)) : 0;
    fill.style.width = pct + "%";
    fill.className = "fill" + (w && w.status ? " " + w.status : "");
    text("bar-" + key + "-text", w ? windowText(w) : "");
    setProgress($("bar-" + key), w ? w.pct : null, (key === "5h" ? "5-hour" : "7-day") + " window of the active account");
  }

  function clearDisplay() {
    text("footer-label", "no account");
    text("footer-email", "");
    var pill = $("footer-status");
    pill.textContent = "unavailable";
    pill.className = "pill pill-unavailable";
    setBar("5h", null);
    setBar("7d", null);
    $("banner").hidden = true;
  }

  // The default vendor's posture fills the contract's footer and banner; without one, this machine's login does.
  function renderFooter(body) {
    last = body;
    text("node", body && body.node ? "· " + body.node : "");
    if (!body || body.available !== true) {
      clearDisplay();
      loadLogin();
      return;
    }
    $("login-box").hidden = true;
    var active = body.active;
    var status = body.status || "unknown";
    text("footer-label", active ? active.label : "no active account");
    text("footer-email", active && active.email ? active.email : "");
    var pill = $("footer-status");
    // An active account that was not read shows its health (a refused token) rather than "error".
    var shown = active && healthOf(active) !== "ok" ? healthOf(active) : status;
    pill.textContent = shown;
    pill.className = "pill pill-" + shown;
    setBar("5h", active ? active.fiveHour : null);
    setBar("7d", active ? active.sevenDay : null);
    renderBanner();
  }

  // ------------------------------------------------------------ the vendors, one section each

  function available(name) { var body = postures[name]; return !!(body && body.available === true); }
  function displayName(v) { return typeof v.displayName === "string" && v.displayName ? v.displayName : v.name; }
  function shownCount() { return vendors.filter(function (v) { return available(v.name); }).length; }

  function loadVendors() {
    vendorsFetched = Date.now();
    fetch("/api/vendors", { cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(setVendors)
      .catch(function () {});
  }

  function setVendors(body) {
    if (!body || !Array.isArray(body.vendors) || typeof body["default"] !== "string") return;
    var first = !vendors.length;
    defaultName = body["default"];
    vendors = body.vendors.filter(function (v) { return v && typeof v.name === "string" && v.name; });
    vendors.forEach(section);
    syncStreams();
    if (first) {
      fetch("/api/accounts", { cache: "no-store" })
        .then(function (r) { return r.json(); })
        .then(function (b) { if (!postures[defaultName]) renderVendor(defaultName, b); })
        .catch(function () {});
    }
  }

  // A vendor's section (heading with its status, error line, reading line, cards) and its advice line,
  // built once, in the API's order. The elements are kept here: ids are for people and tests.
  function section(v) {
    if (sections[v.name]) { sections[v.name].vendor = v; return sections[v.name]; }
    var box = el("section", "vendor");
    box.id = "vendor-" + v.name;
    box.hidden = true;
    var title = el("h2", "vendor-title");
    title.id = v.name + "-title";
    title.appendChild(document.createTextNode(displayName(v) + " accounts "));
    var pill = el("span", "pill pill-none");
    pill.id = v.name + "-status";
    title.appendChild(pill);
    box.setAttribute("aria-labelledby", title.id);
    var error = el("p", "node-error");
    error.id = v.name + "-error";
    error.hidden = true;
    var meta = el("p", "muted");
    meta.id = v.name + "-meta";
    var cards = el("div", "cards");
    cards.id = v.name + "-cards";
    [title, error, meta, cards].forEach(function (node) { box.appendChild(node); });
    $("vendors").appendChild(box);
    var line = el("p", "advice-line");
    line.id = "advice-" + v.name;
    line.hidden = true;
    $("advice").appendChild(line);
    sections[v.name] = { vendor: v, box: box, title: title, pill: pill, error: error, meta: meta, cards: cards,
                         advice: line };
    return sections[v.name];
  }

  function renderVendor(name, body) {
    if (!sections[name]) return;
    postures[name] = body;
    if (name === defaultName) renderFooter(body);
    drawSection(name);
    drawReserveMarks();
    showHeadings();
    // A node that shows another vendor's accounts is not an unavailable node.
    $("unavailable").hidden = !(last && last.available !== true) || shownCount() > 0;
    loadAdvice(name);
    tick();
  }

  function drawSection(name) {
    var sec = sections[name], body = postures[name];
    var shown = available(name);
    sec.box.hidden = !shown;
    if (!shown) {
      sec.error.hidden = true;
      sec.meta.textContent = "";
      sec.cards.textContent = "";
      return;
    }
    var status = body.status || "unknown";
    sec.pill.textContent = status;
    sec.pill.className = "pill pill-" + status;
    sec.error.hidden = !body.error;
    sec.error.textContent = body.error ? "Probe failed (" + body.error.kind + "): " + (body.error.message || "") : "";
    drawCards(name);
  }

  function showHeadings() {
    // A node that shows one vendor's accounts needs no vendor heading when the footer already
    // carries that vendor's status (the default one's); any other shown alone keeps its own.
    var several = shownCount() > 1;
    Object.keys(sections).forEach(function (name) {
      sections[name].title.hidden = !several && name === defaultName;
    });
  }

  // ------------------------------------------------------------ the banner: the monitor's advice

  function currentAdvice(body) {
    // The banner names exactly what the advice line, the status line, the HUD, guard and
    // `switch --best` name (/api/advice, fetched once per probe by loadAdvice below).
    var a = advice[defaultName] && advice[defaultName].body;
    if (!a || a.available !== true || a.probedAt !== body.probedAt) return null;
    var activeLabel = body.active ? body.active.label : null;
    return (a.active ? a.active.label : null) === activeLabel ? a : null;
  }

  function renderBanner() {
    var body = last, banner = $("banner");
    if (!body || body.available !== true) { banner.hidden = true; return; }
    var a = currentAdvice(body);
    var acting = a && (a.advice === "switch" || a.advice === "wait");
    if (a && a.active && healthOf(a.active) !== "ok" && acting) {
      // Not read: nothing is heading for a limit; the banner says what is wrong and whom to switch to.
      text("banner-head", healthOf(a.active) === "refused" ? "Token refused." : "Account not read.");
      text("banner-text", sentence(a.reason));
      banner.hidden = false;
      return;
    }
    if (body.status !== "rejected" && !acting) { banner.hidden = true; return; }
    text("banner-head", body.status === "rejected" ? "Account exhausted." : "Heading for the limit.");
    text("banner-text", bannerText(body, a));
    banner.hidden = false;
  }

  function waitEnds(provider) {
    // When the advice's wait ends: its waitUntil, the holding window's own reset, so the advice
    // line and the banner count down to one instant; else waitS from when the advice was read.
    var held = advice[provider];
    if (!held || !held.body) return NaN;
    var until = typeof held.body.waitUntil === "string" ? Date.parse(held.body.waitUntil) : NaN;
    if (isNaN(until) && typeof held.body.waitS === "number") until = held.at + held.body.waitS * 1000;
    return until;
  }

  function bannerText(body, a) {
    var active = body.active;
    var who = active ? active.label : "The active account";
    var msg = body.status === "rejected"
      ? who + " is exhausted" + (active && active.bindingWindow ? " (its " + windowWords(active.bindingWindow) + ")" : "") + ". "
      : who + " is forecast to reach its limit before it resets. ";
    if (!a) return msg;
    if (a.advice === "switch" && a.to) {
      var first = a.ranked && a.ranked[0];
      return msg + "Switch to " + a.to.label + (a.to.email ? " (" + a.to.email + ")" : "") +
        (first && first.reachesReset ? ": its forecast reaches the reset with headroom." : ": it has the most headroom left.");
    }
    var until = waitEnds(defaultName), left = until - Date.now();
    if (a.advice === "wait") {
      return msg + "Wait " + (left > 0 ? fmtDuration(left) : "a moment") +
        " for its reset: waiting is cheaper than switching.";
    }
    if (unreadInAdvice(a)) return msg + sentence(a.reason);
    return msg + "No sibling account is forecast to reach its reset with headroom" +
      (isNaN(until) ? "." : "; " + who + " resets in " + fmtDuration(left) + ".");
  }

  // ------------------------------------------------------------ health: accounts that were not read

  // An account whose health is not ok (a refused token, figures that are not fresh) was not read, or
  // not lately: "headroom" and "full" are never said of it. What is wrong, and the fix, are the
  // advice's own words (its reason, each account's note), so the page names no vendor's command.
  function healthOf(a) { return a && typeof a.health === "string" ? a.health : "ok"; }
  function unreadInAdvice(a) {
    if (!a) return false;
    if (a.active && healthOf(a.active) !== "ok") return true;
    return (a.ranked || []).some(function (r) { return healthOf(r) !== "ok"; });
  }
  function sentence(words) {
    words = String(words || "");
    return /[.!?]$/.test(words) ? words : words + ".";
  }
  function adviceFor(provider, body) {
    var held = advice[provider];
    var a = held && held.body;
    return a && a.available === true && body && a.probedAt === body.probedAt ? a : null;
  }
  function noteFor(provider, label) {
    var a = adviceFor(provider, postures[provider]);
    if (!a) return null;
    var entries = [a.active].concat(a.ranked || []);
    for (var i = 0; i < entries.length; i++) {
      if (entries[i] && entries[i].label === label && typeof entries[i].note === "string") return entries[i].note;
    }
    return null;
  }

  // ------------------------------------------------------------ the advice, first on the page

  // The monitor's advice for each vendor (/api/advice, the one the status line, HUD, guard and
  // `switch --best` follow), asked once per probe and said in one sentence.
  var advice = {};  // vendor name -> {body, at}

  function advicePath(provider) {
    return provider === defaultName ? "/api/advice" : "/api/advice?provider=" + encodeURIComponent(provider);
  }

  function loadAdvice(provider) {
    var body = postures[provider];
    if (!body || body.available !== true) { advice[provider] = null; renderAdvice(); return; }
    var had = advice[provider];
    if (had && had.body.probedAt === body.probedAt) { renderAdvice(); return; }
    fetch(advicePath(provider), { cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (a) {
        // waitS counts from when the monitor answered: keep the instant, so the sentence counts down.
        advice[provider] = { body: a, at: Date.now() };
        drawCards(provider);
        renderAdvice();
      })
      .catch(function () { advice[provider] = null; renderAdvice(); });
  }

  function accountIn(body, label) {
    var found = null;
    ((body && body.accounts) || []).forEach(function (a) { if (a.label === label) found = a; });
    return found || (body && body.active && body.active.label === label ? body.active : null);
  }

  function fullerWindow(acc) {
    var best = null;
    WINDOWS.forEach(function (spec) {
      var w = acc && acc[spec.field];
      if (w && typeof w.pct === "number" && (!best || w.pct > best.w.pct)) best = { spec: spec, w: w };
    });
    return best;
  }

  function stayWords(label, acc) {
    var best = fullerWindow(acc);
    if (!best) return "Stay on " + label + ".";
    var f = (trajWindow(label, best.spec.field) || {}).forecast;
    var wall = f && f.wallAt ? Date.parse(f.wallAt) : NaN;
    if (f && f.beforeReset && !isNaN(wall)) {
      return "Stay on " + label + ", though its " + best.spec.words +
        " is forecast to reach 100% at " + localClock(wall) + ", before it resets.";
    }
    if (f && typeof f.pctAtReset === "number") {
      return "Stay on " + label + " — its " + best.spec.words + " reaches its reset at " + fmtPct(f.pctAtReset) + ".";
    }
    var reset = best.w.resetsAt ? Date.parse(best.w.resetsAt) : NaN;
    return "Stay on " + label + " — its " + best.spec.words + " is at " + fmtPct(best.w.pct) +
      (isNaN(reset) ? "." : " and resets at " + localClock(reset) + ".");
  }

  function adviceWords(provider) {
    var held = advice[provider], body = postures[provider];
    if (!held || !body || body.available !== true) return null;
    var a = held.body;
    if (!a || a.available !== true || typeof a.advice !== "string") return null;
    var active = a.active && a.active.label;
    var until = waitEnds(provider);
    // The active account not read (its token refused...), or none and another not read: the reason
    // says what is wrong and the fix.
    if ((a.active && healthOf(a.active) !== "ok") || (a.advice === "none" && unreadInAdvice(a))) {
      return sentence(a.reason);
    }
    if (a.advice === "stay" && active) return stayWords(active, accountIn(body, active));
    if (a.advice === "wait" && active) {
      return "Wait " + fmtDuration(Math.max(0, until - Date.now())) + ": " + active + " resets at " +
        localClock(until) + "; waiting is cheaper than switching.";
    }
    if (a.advice === "switch" && a.to) {
      var first = (a.ranked || [])[0] || {};
      return "Switch to " + a.to.label + (a.to.email ? " (" + a.to.email + ")" : "") + ": " +
        (typeof first.headroomPct === "number" ? fmtPct(first.headroomPct) + " headroom left" : "it has headroom") +
        (first.reachesReset ? ", and its forecast reaches its reset." : ", the most of any account.");
    }
    if (a.advice === "none") {
      return "No account has headroom" + (isNaN(until) ? "." : " until " + localClock(until) +
        " (in " + fmtDuration(Math.max(0, until - Date.now())) + ").");
    }
    return null;
  }

  function renderAdvice() {
    // With more than one vendor on the page, each sentence says whose accounts it is about.
    var several = shownCount() > 1;
    var shown = 0;
    vendors.forEach(function (v) {
      var sec = sections[v.name];
      if (!sec) return;
      var node = sec.advice, words = adviceWords(v.name);
      node.hidden = !words;
      node.textContent = "";
      if (!words) return;
      shown++;
      if (several) node.appendChild(el("strong", "advice-vendor", displayName(v) + ": "));
      node.appendChild(document.createTextNode(words));
      var a = advice[v.name].body;
      node.className = "advice-line advice-" + a.advice;
    });
    $("advice").hidden = shown === 0;
    renderBanner();
  }

  // ------------------------------------------------------------ cards

  function trajWindow(label, field) {
    if (!traj || !traj.accounts) return null;
    for (var i = 0; i < traj.accounts.length; i++) {
      if (traj.accounts[i].label === label) return traj.accounts[i][field];
    }
    return null;
  }

  function renderCards() {
    Object.keys(sections).forEach(drawCards);
    drawReserveMarks();
  }

  function drawCards(name) {
    var sec = sections[name], body = postures[name];
    sec.cards.textContent = "";
    if (!available(name)) return;
    (body.accounts || []).forEach(function (a) { sec.cards.appendChild(card(a, sec.vendor)); });
  }

  // The human reserve (svc.posture.reservePct, carried by the trajectory body):
  // a mark on every bar where automation stops, at 100 - reserve percent.
  function drawReserveMarks() {
    var reserve = traj && typeof traj.reservePct === "number" ? traj.reservePct : 0;
    var bars = document.querySelectorAll(".bar");
    for (var i = 0; i < bars.length; i++) {
      var mark = bars[i].querySelector(".reserve-mark");
      if (reserve <= 0) { if (mark) mark.parentNode.removeChild(mark); continue; }
      if (!mark) {
        mark = el("span", "reserve-mark");
        mark.setAttribute("aria-hidden", "true");
        bars[i].appendChild(mark);
      }
      mark.style.left = (100 - reserve) + "%";
      mark.title = "human reserve " + reserve + "%: automation holds from " + (100 - reserve) + "%";
    }
  }

  function accountExtras(node, a, vendor, fixSaid) {
    // What a vendor reports beyond the contract's fields (none for an account in the contract's body).
    if (a.error && a.error.fix && !fixSaid) node.appendChild(el("p", "card-fix", a.error.fix));
    var bits = [];
    if (a.planType) bits.push("plan " + a.planType);
    if (a.source === "session") bits.push("read from the " + displayName(vendor) + " CLI's own session log");
    else if (a.source === "api") bits.push("read from the " + displayName(vendor) + " usage service");
    if (a.credits && a.credits.unlimited) bits.push("unlimited credits");
    else if (a.credits && typeof a.credits.balance === "number") bits.push("credits " + a.credits.balance);
    if (a.resetCredits && a.resetCredits.available > 0) {
      bits.push(a.resetCredits.available + (a.resetCredits.available === 1 ? " usage reset" : " usage resets") + " banked" +
                (typeof a.resetCredits.applicable === "number" ? " (" + a.resetCredits.applicable + " usable now)" : ""));
    }
    if (bits.length) node.appendChild(el("p", "card-extra", bits.join(" · ")));
    extraLines(node, (a.extraWindows || []).concat(a.codeReview || []));
  }

  // One line per extra window: a model's own limit, a credit plan's `credits`, another weekly bucket.
  function extraLines(node, windows) {
    windows.forEach(function (w) {
      var span = typeof w.seconds !== "number" ? "" :
        w.seconds % 86400 === 0 ? " " + (w.seconds / 86400) + "d" : " " + Math.round(w.seconds / 3600) + "h";
      var c = countdown(w.resetsAt);
      node.appendChild(el("p", "card-extra", (w.name || "limit") + span + ": " + fmtPct(w.pct) + (c ? " · " + c : "")));
    });
  }

  function card(a, vendor) {
    var node = el("article", "card" + (a.active ? " active" : ""));
    node.setAttribute("data-label", a.label);
    var head = el("div", "card-head");
    head.appendChild(el("h3", "card-label", a.label));
    if (a.active) head.appendChild(el("span", "badge", "active"));
    var health = healthOf(a);
    var st = health !== "ok" ? health : a.error ? "error" :
      ({ allowed: "ok", allowed_warning: "degraded", rejected: "rejected" }[a.bindingStatus] || "unknown");
    var pill = el("span", "pill pill-" + st, st);
    if (health !== "ok") pill.title = "health: " + health;
    head.appendChild(pill);
    head.appendChild(el("span", "card-email", a.email || ""));
    node.appendChild(head);
    var note = health !== "ok" ? noteFor(vendor.name, a.label) : null;
    if (note) node.appendChild(el("p", "card-error card-health", sentence(note)));
    else if (a.error) node.appendChild(el("p", "card-error", a.error.kind + (a.error.message ? ": " + a.error.message : "")));
    if (health !== "ok" && typeof a.readAt === "number") {
      // The figures below are the last good reading's, kept beside the failed one: their age, in the open.
      var kept = el("p", "kept-note", "");
      kept.setAttribute("data-read-at", String(a.readAt));
      node.appendChild(kept);
    }
    accountExtras(node, a, vendor, !!note);
    // An account never read has no figures to draw: its note says why.
    var unread = health !== "ok" && typeof a.readAt !== "number" && !a.fiveHour && !a.sevenDay;
    // An account whose limits are all of other lengths (a monthly quota) is shown by those alone.
    var othersOnly = !a.fiveHour && !a.sevenDay && (a.extraWindows || []).length > 0;
    if (!unread && !othersOnly) WINDOWS.forEach(function (spec) { node.appendChild(windowBlock(a, spec)); });
    var stale = el("p", "stale-note", "");
    stale.hidden = true;
    node.appendChild(stale);
    return node;
  }

  function windowBlock(a, spec) {
    var w = a[spec.field];
    var tw = trajWindow(a.label, spec.field);
    var block = el("div", "win");
    block.setAttribute("data-window", spec.field);
    var head = el("div", "win-head");
    head.appendChild(el("span", "win-name", spec.name));
    head.appendChild(el("span", "win-pct", w ? fmtPct(w.pct) : "—"));
    var reset = el("span", "win-reset", w ? countdown(w.resetsAt) : "");
    reset.setAttribute("data-resets-at", w && w.resetsAt ? w.resetsAt : "");
    head.appendChild(reset);
    block.appendChild(head);
    var bar = el("div", "bar");
    setProgress(bar, w ? w.pct : null, a.label + " " + spec.words);
    var fill = el("div", "fill" + (w && w.status ? " " + w.status : ""));
    fill.style.width = (w && typeof w.pct === "number" ? Math.max(0, Math.min(100, w.pct)) : 0) + "%";
    bar.appendChild(fill);
    block.appendChild(bar);
    block.appendChild(sparkline(a.label, spec, w, tw));
    block.appendChild(legend(!!(tw && tw.forecast && tw.forecast.beforeReset)));
    var sentence = forecastSentence(tw);
    block.appendChild(el("p", "sentence" + (sentence.alarm ? " alarm" : ""), w ? sentence.text : ""));
    return block;
  }

  function sparkline(label, spec, w, tw) {
    var width = 300, height = 56, now = Date.now();
    var x0 = now - spec.span, x1 = now + spec.span / 4;
    var points = (history[spec.field][label] || []).filter(function (p) { return p[0] >= x0 && p[0] <= now + 60000; });
    var top = 100;
    points.forEach(function (p) { if (p[1] > top) top = p[1]; });
    function x(t) { return ((Math.max(x0, Math.min(x1, t)) - x0) / (x1 - x0) * width).toFixed(1); }
    function y(p) { return (height - 2 - Math.max(0, p) / top * (height - 4)).toFixed(1); }
    var svg = svgEl("svg", { "class": "spark", viewBox: "0 0 " + width + " " + height, preserveAspectRatio: "none",
                             role: "img", "aria-label": chartWords(label, spec, w, tw, points.length) });
    var title = svgEl("title", {});
    title.textContent = svg.getAttribute("aria-label");
    svg.appendChild(title);
    svg.appendChild(svgEl("line", { "class": "spark-wall", x1: 0, x2: width, y1: y(100), y2: y(100) }));
    svg.appendChild(svgEl("line", { "class": "spark-now", x1: x(now), x2: x(now), y1: 0, y2: height }));
    if (points.length) {
      var d = points.map(function (p, i) { return (i ? "L" : "M") + x(p[0]) + " " + y(p[1]); }).join(" ");
      svg.appendChild(svgEl("path", { "class": "spark-line", d: d }));
    }
    var resetAt = w && w.resetsAt ? Date.parse(w.resetsAt) : NaN;
    if (!isNaN(resetAt) && resetAt <= x1) {
      svg.appendChild(svgEl("line", { "class": "spark-reset", x1: x(resetAt), x2: x(resetAt), y1: 0, y2: height }));
    }
    var f = tw && tw.forecast;
    if (f && w && typeof w.pct === "number") {
      // Dashed: from now at the current pct, at the forecast rate, to the wall
      // (or the reset, or the chart's edge, whichever comes first).
      var end = x1;
      if (!isNaN(resetAt)) end = Math.min(end, resetAt);
      var wall = f.wallAt ? Date.parse(f.wallAt) : NaN;
      if (!isNaN(wall)) end = Math.min(end, Math.max(now, wall));
      var endPct = w.pct + f.ratePctPerHour * Math.max(0, end - now) / HOUR;
      svg.appendChild(svgEl("path", { "class": "spark-forecast" + (f.beforeReset ? " alarm" : ""),
                                      d: "M" + x(now) + " " + y(w.pct) + " L" + x(end) + " " + y(Math.min(endPct, top)) }));
    }
    return svg;
  }

  // What the chart shows, in words: its text alternative carries the data, not just its name.
  function chartWords(label, spec, w, tw, readings) {
    var words = label + " " + spec.words + ": " + (w && typeof w.pct === "number" ? fmtPct(w.pct) + " now" : "no reading now");
    var f = tw && tw.forecast, wall = f && f.wallAt ? Date.parse(f.wallAt) : NaN;
    if (f && f.beforeReset && !isNaN(wall)) words += ", forecast 100% at " + localClock(wall);
    else if (f && typeof f.pctAtReset === "number") words += ", forecast " + fmtPct(f.pctAtReset) + " at its reset";
    var reset = w && w.resetsAt ? Date.parse(w.resetsAt) : NaN;
    if (!isNaN(reset)) words += ", resets " + localClock(reset);
    return words + "; " + readings + " readings over the last " + fmtDuration(spec.span) + ".";
  }

  // The chart's key, drawn with the chart's own strokes so it reads the same in both schemes.
  var LEGEND = [["spark-wall", "limit"], ["spark-line", "used"], ["spark-now", "now"],
                ["spark-reset", "reset"], ["spark-forecast", "forecast"]];
  function legend(alarm) {
    var box = el("p", "spark-legend");
    box.setAttribute("aria-hidden", "true");  // the chart's text alternative already says it
    LEGEND.forEach(function (item) {
      var key = el("span", "key");
      var icon = svgEl("svg", { "class": "key-icon", viewBox: "0 0 16 8", width: 16, height: 8 });
      var cls = item[0] + (item[0] === "spark-forecast" && alarm ? " alarm" : "");
      icon.appendChild(item[0] === "spark-now" || item[0] === "spark-reset"
        ? svgEl("line", { "class": cls, x1: 8, x2: 8, y1: 0, y2: 8 })
        : svgEl("line", { "class": cls, x1: 0, x2: 16, y1: 4, y2: 4 }));
      key.appendChild(icon);
      key.appendChild(document.createTextNode(item[1]));
      box.appendChild(key);
    });
    return box;
  }

  // ------------------------------------------------------------ alerts

  function alertText(ev) {
    var a = ev.attributes || {};
    var win = a["ratelimit.window"] === "seven_day" ? "7d" : "5h";
    if (a["event.name"] === "account.quota.forecast") {
      return a["account.handle"] + " " + win + ": forecast to reach 100% at " +
        localClock(Date.parse(a["ratelimit.wall_at"])) + ", before its reset";
    }
    if (a["event.name"] === "account.quota.wall") {
      var usable = Date.parse(a["ratelimit.usable_at"]);
      return a["account.handle"] + " " + win + " reached 100% (" + fmtPct(a["ratelimit.pct"]) + ")" +
        (isNaN(usable) ? "" : ": usable again at " + localClock(usable));
    }
    if (a["event.name"] === "account.quota.usable") {
      return a["account.handle"] + " is usable again: its " + win + " window reset (now " +
        fmtPct(a["ratelimit.pct"]) + ")";
    }
    return a["account.handle"] + " " + win + " reached " + a["ratelimit.threshold"] + "% (" + fmtPct(a["ratelimit.pct"]) + ")";
  }

  function renderAlerts(list) {
    var box = $("alerts");
    box.textContent = "";
    (list || []).forEach(function (ev) {
      var name = ev.attributes && ev.attributes["event.name"];
      var kind = typeof name === "string" ? name.replace(/^account\.quota\./, "") : "threshold";
      var li = el("li", "kind-" + kind);
      li.setAttribute("data-id", ev.id || "");
      var ts = Date.parse(ev.ts);
      li.appendChild(el("span", "when", isNaN(ts) ? "" : new Date(ts).toLocaleString([], { weekday: "short", hour: "2-digit", minute: "2-digit" })));
      li.appendChild(el("span", "what", alertText(ev)));
      box.appendChild(li);
    });
    $("alerts-empty").hidden = box.childNodes.length > 0;
  }

  function notify(ev) {
    if (!window.Notification || Notification.permission !== "granted") return;
    if (localStorage.getItem("svc-notify") !== "1") return;
    try { new Notification("svc-monitor: quota alert", { body: alertText(ev), tag: ev.id }); } catch (e) { /* ignored */ }
  }

  function onAlert(ev) {
    if (!ev || !ev.id || alertsSeen[ev.id]) return;
    alertsSeen[ev.id] = true;
    var list = (traj && traj.alerts) ? traj.alerts.slice() : [];
    if (!list.some(function (x) { return x.id === ev.id; })) list.unshift(ev);
    if (traj) traj.alerts = list.slice(0, 20);
    renderAlerts(list.slice(0, 20));
    notify(ev);
  }

  function setupNotify() {
    var btn = $("notify");
    function show() {
      var on = window.Notification && Notification.permission === "granted" && localStorage.getItem("svc-notify") === "1";
      btn.textContent = on ? "Notifying" : "Notify me";
      btn.className = on ? "on" : "";
    }
    function refused(why) {
      // Said where the user is looking: the button stays, the message says why nothing happened.
      text("notify-note", "Notifications are off: " + why);
      show();
    }
    btn.addEventListener("click", function () {
      if (localStorage.getItem("svc-notify") === "1") {
        localStorage.removeItem("svc-notify");
        text("notify-note", "Notifications turned off.");
        return show();
      }
      if (!window.Notification) return refused("this browser has no notifications (they need HTTPS or localhost).");
      if (Notification.permission === "denied") {
        return refused("this browser blocks them for this page; allow them in the site settings, then press again.");
      }
      Promise.resolve(Notification.requestPermission()).then(function (p) {
        if (p === "granted") {
          localStorage.setItem("svc-notify", "1");
          text("notify-note", "Notifying: each quota alert shows as a browser notification.");
          show();
        } else {
          refused(p === "denied" ? "the browser refused permission; allow notifications in the site settings."
                                 : "permission was not given.");
        }
      }, function () { refused("the browser refused to ask for permission."); });
    });
    show();
  }

  // ------------------------------------------------------------ trajectory and history

  function renderTrajectory(body) {
    if (!body || body.available === false) { traj = null; renderCards(); return; }
    traj = body;
    // Readings of a vendor the page does not follow yet: the node has started to show it.
    var unfollowed = (body.accounts || []).some(function (a) {
      return typeof a.provider === "string" && a.provider !== defaultName && !followed[a.provider];
    });
    if (unfollowed && Date.now() - vendorsFetched >= VENDORS_AGAIN_MS) loadVendors();
    readFollowed();
    (body.alerts || []).forEach(function (ev) { alertsSeen[ev.id] = true; });
    renderAlerts(body.alerts);
    if (typeof body.probedAt === "number") {
      (body.accounts || []).forEach(function (a) {
        WINDOWS.forEach(function (spec) {
          var w = a[spec.field];
          if (!w || typeof w.pct !== "number") return;
          var series = history[spec.field][a.label] || (history[spec.field][a.label] = []);
          if (!series.length || series[series.length - 1][0] < body.probedAt) series.push([body.probedAt, w.pct]);
        });
      });
    }
    renderCards();
    tick();
    if (Date.now() - historyFetched > 60000) loadHistory();
  }

  function loadHistory() {
    historyFetched = Date.now();
    WINDOWS.forEach(function (spec) {
      fetch("/api/history?hours=" + spec.span / HOUR, { cache: "no-store" })
        .then(function (r) { return r.json(); })
        .then(function (body) {
          var byLabel = {};
          Object.keys(body.accounts || {}).forEach(function (label) { byLabel[label] = body.accounts[label][spec.field] || []; });
          history[spec.field] = byLabel;
          renderCards();
          tick();
        })
        .catch(function () {});
    });
  }

  // ------------------------------------------------------------ this machine's login (no accounts file)

  function loadLogin() {
    if (Date.now() - loginFetched < LOGIN_POLL_MS) { renderLogin(login); return; }
    loginFetched = Date.now();
    fetch("/api/login", { cache: "no-store" })
      .then(function (r) { return r.json(); })
      .then(renderLogin, function () { renderLogin(null); });
  }

  function loginStatus(body) {
    var worst = -1;
    WINDOWS.forEach(function (spec) {
      var w = body[spec.field];
      if (w && typeof w.pct === "number" && w.pct > worst) worst = w.pct;
    });
    return worst >= 100 ? "rejected" : worst >= 80 ? "degraded" : worst >= 0 ? "ok" : "unknown";
  }

  // Whose login it is, from the body (loginName): the page names no program itself.
  function loginWords(body) {
    var name = typeof body.loginName === "string" && body.loginName ? body.loginName : null;
    return { title: "This machine's " + (name ? name + " " : "") + "login",
             note: "Until the accounts file has an account, this is the login " + (name || "the coding agent") +
                   " itself uses on this machine.",
             read: "Read from " + (name ? name + "'s" : "the coding agent's") + " own login on this machine." };
  }

  function renderLogin(body) {
    login = body && body.available === true ? body : null;
    var box = $("login-box");
    box.hidden = !login || (last && last.available === true);
    $("login-cards").textContent = "";
    if (box.hidden) return;
    var status = loginStatus(login);
    var words = loginWords(login);
    text("login-title", words.title);
    text("login-note", words.note);
    text("footer-label", words.title.charAt(0).toLowerCase() + words.title.slice(1));
    text("footer-email", login.plan ? "plan " + login.plan : "");
    var pill = $("footer-status");
    pill.textContent = status;
    pill.className = "pill pill-" + status;
    setBar("5h", login.fiveHour);
    setBar("7d", login.sevenDay);
    var node = el("article", "card login-card");
    var head = el("div", "card-head");
    // The section's heading already names the login: the card says what it shows.
    head.appendChild(el("h3", "card-label", login.plan ? "Plan " + login.plan : "Usage"));
    head.appendChild(el("span", "pill pill-" + status, status));
    node.appendChild(head);
    node.appendChild(el("p", "card-plan", words.read));
    WINDOWS.forEach(function (spec) {
      var w = login[spec.field];
      var block = el("div", "win");
      block.setAttribute("data-window", spec.field);
      var whead = el("div", "win-head");
      whead.appendChild(el("span", "win-name", spec.name));
      whead.appendChild(el("span", "win-pct", w ? fmtPct(w.pct) : "—"));
      var reset = el("span", "win-reset", w ? countdown(w.resetsAt) : "");
      reset.setAttribute("data-resets-at", w && w.resetsAt ? w.resetsAt : "");
      whead.appendChild(reset);
      block.appendChild(whead);
      var bar = el("div", "bar");
      setProgress(bar, w ? w.pct : null, "this machine's login " + spec.words);
      var fill = el("div", "fill");
      fill.style.width = (w && typeof w.pct === "number" ? Math.max(0, Math.min(100, w.pct)) : 0) + "%";
      bar.appendChild(fill);
      block.appendChild(bar);
      node.appendChild(block);
    });
    extraLines(node, login.extraWindows || []);
    var extra = login.extraUsage;
    if (extra && extra.enabled && typeof extra.utilization === "number") {
      node.appendChild(el("p", "card-extra", "extra usage: " + fmtPct(extra.utilization) + " of the monthly limit"));
    }
    node.appendChild(el("p", "card-plan login-age", ""));
    $("login-cards").appendChild(node);
    tickLogin();
  }

  function tickLogin() {
    if (!login || $("login-box").hidden) return;
    if (Date.now() - loginFetched >= LOGIN_POLL_MS) loadLogin();
    var sampled = Date.parse(login.sampledAt);
    var age = $("login-cards").querySelector(".login-age");
    if (age) age.textContent = isNaN(sampled) ? "" : "Last reading " + fmtDuration(Date.now() - sampled) + " ago";
    text("bar-5h-text", login.fiveHour ? windowText(login.fiveHour) : "");
    text("bar-7d-text", login.sevenDay ? windowText(login.sevenDay) : "");
    tickCards($("login-cards").childNodes, false, "");
  }

  // ------------------------------------------------------------ the clock

  function tick() {
    // Countdowns, ages and staleness move every second without a new frame.
    var wait = vendors.length ? VENDORS_POLL_MS : VENDORS_AGAIN_MS;
    if (Date.now() - vendorsFetched >= wait) loadVendors();
    renderAdvice();
    vendors.forEach(function (v) {
      var sec = sections[v.name], body = postures[v.name];
      if (!sec || !available(v.name)) return;
      var words = readingWords(body.probedAt);
      sec.meta.textContent = words;
      tickCards(sec.cards.childNodes, isStale(body.probedAt), words);
    });
    tickStopped();
    if (!last || last.available !== true) { tickLogin(); return; }
    var a = last.active;
    text("bar-5h-text", a && a.fiveHour ? windowText(a.fiveHour) : "");
    text("bar-7d-text", a && a.sevenDay ? windowText(a.sevenDay) : "");
    $("footer").className = "footer" + (isStale(last.probedAt) ? " stale" : "");
  }

  function tickCards(cards, stale, words) {
    for (var i = 0; i < cards.length; i++) {
      var node = cards[i];
      node.className = node.className.replace(/ stale/g, "") + (stale ? " stale" : "");
      var note = node.querySelector(".stale-note");
      if (note) {
        note.hidden = !stale;
        note.textContent = stale ? words : "";
      }
      var kept = node.querySelector(".kept-note");
      if (kept) {
        var readAt = Number(kept.getAttribute("data-read-at"));
        kept.textContent = "The figures shown are the last good reading's, " + fmtDuration(Date.now() - readAt) + " old.";
      }
      var resets = node.querySelectorAll(".win-reset");
      for (var j = 0; j < resets.length; j++) {
        var iso = resets[j].getAttribute("data-resets-at");
        resets[j].textContent = iso ? countdown(iso) : "";
      }
    }
  }

  // ------------------------------------------------------------ streams

  function setConn(state) {
    var node = $("conn");
    node.textContent = state;
    node.className = "conn conn-" + state;
  }

  // A monitor that stopped answering: after STOPPED_AFTER failed reconnects of the stream that
  // drives the connection pill, the page says so, and greys its advice and banner (they are the
  // last reading's, and may no longer hold). The first answer clears it.
  var STOPPED_AFTER = 3;
  var failedReconnects = -1;  // -1: connected (the next error is the drop itself, not a failed reconnect)
  var lostAt = 0;

  function answered() {
    failedReconnects = -1;
    lostAt = 0;
    document.body.classList.remove("monitor-stopped");
    $("stopped").hidden = true;
    text("advice-title", "Which account to use now");
  }

  function unanswered() {
    if (!lostAt) lostAt = Date.now();
    failedReconnects++;
    if (failedReconnects < STOPPED_AFTER) return;
    setConn("stopped");
    document.body.classList.add("monitor-stopped");
    text("advice-title", "Which account to use now (the last advice, before the monitor stopped answering)");
    tickStopped();
  }

  function tickStopped() {
    if (failedReconnects < STOPPED_AFTER) return;
    var box = $("stopped");
    box.hidden = false;
    box.textContent = "The monitor stopped answering " + fmtDuration(Date.now() - lostAt) + " ago (" +
      new Date(lostAt).toLocaleTimeString() + "), after " + failedReconnects + " failed reconnects. What this " +
      "page shows is its last reading; the page keeps trying, and fills in again when the monitor is back.";
  }

  function connect(path, handlers, showState) {
    if (reconnectTimers[path]) { clearTimeout(reconnectTimers[path]); reconnectTimers[path] = null; }
    if (sources[path]) sources[path].close();
    if (showState && failedReconnects < STOPPED_AFTER) setConn("connecting");
    var source = new EventSource(path);
    sources[path] = source;
    source.addEventListener("open", function () { if (showState) { setConn("live"); answered(); } });
    Object.keys(handlers).forEach(function (name) {
      source.addEventListener(name, function (ev) {
        if (showState) { setConn("live"); answered(); }
        var data;
        try { data = JSON.parse(ev.data); } catch (e) { text("message", "Bad frame from the stream."); return; }
        handlers[name](data);
      });
    });
    source.addEventListener("error", function () {
      if (showState) {
        if (failedReconnects < STOPPED_AFTER - 1) setConn("reconnecting");
        unanswered();
      }
      // The browser retries by itself after `retry:`; when it gives up (the
      // stream ended with an error status) start a fresh one.
      if (source.readyState === EventSource.CLOSED && !reconnectTimers[path]) {
        reconnectTimers[path] = setTimeout(function () { connect(path, handlers, showState); }, 5000);
      }
    });
  }

  var streams = {};  // path -> [handlers, whether it drives the connection pill]

  function openStreams() {
    Object.keys(streams).forEach(function (path) { connect(path, streams[path][0], streams[path][1]); });
  }

  function closeStream(path) {
    if (reconnectTimers[path]) clearTimeout(reconnectTimers[path]);
    reconnectTimers[path] = null;
    if (sources[path]) sources[path].close();
    delete sources[path];
  }

  function streamPath(name) {
    return name === defaultName ? "/api/accounts/stream"
                                : "/api/accounts/stream?provider=" + encodeURIComponent(name);
  }

  // Another vendor's posture is read, not streamed: the browser gives a page six connections to
  // the monitor, and a node of five vendors would spend them all on streams. The trajectory
  // stream pushes after every vendor's probe, so each push re-reads the vendors the page shows
  // (a cached read, answered from memory).
  var followed = {};    // vendor name -> true while the node shows its accounts
  var reading = {};     // vendor name -> a read in flight

  function readVendor(name) {
    if (reading[name]) return;
    reading[name] = true;
    fetch("/api/accounts?provider=" + encodeURIComponent(name), { cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (body) { if (body && followed[name]) renderVendor(name, body); })
      .catch(function () { /* the stream's reconnects say when the monitor stopped answering */ })
      .then(function () { reading[name] = false; });
  }

  function readFollowed() { Object.keys(followed).forEach(readVendor); }

  function syncStreams() {
    // The default vendor's stream always: it says when the node has nothing to show, and its
    // state is the connection pill's. Every other vendor the node shows is followed by reads.
    var path = defaultName === null ? null : streamPath(defaultName);
    if (path !== null && !streams[path]) {
      streams[path] = [{ account: function (body) { renderVendor(defaultName, body); } }, true, defaultName];
      connect(path, streams[path][0], streams[path][1]);
    }
    var wanted = {};
    vendors.forEach(function (v) { if (v.name !== defaultName && v.shown === true) wanted[v.name] = true; });
    Object.keys(followed).forEach(function (name) {
      if (wanted[name]) return;
      delete followed[name];
      renderVendor(name, null);
    });
    Object.keys(wanted).forEach(function (name) {
      if (followed[name]) return;
      followed[name] = true;
      readVendor(name);
    });
  }

  function closeStreams() {
    Object.keys(reconnectTimers).forEach(function (path) {
      if (reconnectTimers[path]) clearTimeout(reconnectTimers[path]);
      reconnectTimers[path] = null;
    });
    Object.keys(sources).forEach(closeStream);
  }

  function forceRefresh() {
    var btn = $("refresh");
    btn.disabled = true;
    text("message", "Probing…");
    fetch("/api/accounts?refresh=true", { headers: { "X-Svc-Refresh": "1" }, cache: "no-store" })
      .then(function (r) { return r.json().then(function (j) { return { status: r.status, body: j }; }); })
      .then(function (res) {
        if (res.status === 200) {
          if (defaultName !== null) renderVendor(defaultName, res.body);
          text("message", res.body.cached ? "Refreshed recently; showing the last probe." : "Refreshed.");
        } else {
          text("message", "Refresh refused: " + (res.body.message || res.status));
        }
      })
      .catch(function () { text("message", "Refresh failed: monitor unreachable."); })
      .then(function () { btn.disabled = false; });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var meta = document.querySelector('meta[name="svc-probe-interval"]');
    var seconds = meta ? parseFloat(meta.getAttribute("content")) : NaN;
    if (seconds > 0) probeIntervalMs = seconds * 1000;
    $("refresh").addEventListener("click", forceRefresh);
    setupNotify();
    loadHistory();
    // The vendors' streams follow once /api/vendors has named them (setVendors).
    streams["/api/trajectory/stream"] = [{ trajectory: renderTrajectory, alert: onAlert }, false, null];
    openStreams();
    loadVendors();
    setInterval(tick, 1000);
  });
  // A page the user has left stays in the browser's back-forward cache with its streams
  // open; three pages of them exhaust the browser's six connections to this host and the
  // next page never loads. Close them on the way out, open them again on the way back.
  window.addEventListener("pagehide", closeStreams);
  window.addEventListener("pageshow", function (ev) {
    if (!ev.persisted || !Object.keys(streams).length) return;
    openStreams();
    loadVendors();
  });
})();
