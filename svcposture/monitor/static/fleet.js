// The fleet page: every provider account across the fleet (/api/fleet/accounts), most urgent
// first, which host takes a ticket (/api/fleet/owner), then every roster host (/api/fleet) by
// the same urgency. Plain DOM, text only: host names, labels and errors come from peers and are
// never parsed as HTML.
// The page names no vendor: the list, its order and the display names come from /api/vendors.
"use strict";
(function () {
  var REFRESH_MS = 30000;
  // Problems first: a host that is not live is what an operator looks for.
  var STATE_ORDER = { missing: 0, stale: 1, unknown: 2, live: 3 };
  var STATES = ["live", "stale", "missing", "unknown"];
  var fetchedAt = 0;
  var vendors = [];         // [{name, displayName}] from /api/vendors, in its order
  var defaultName = null;   // the vendor whose active account a host row carries as `account`
  // A host row's own fields: a vendor named like one of them has no block of its own in the row.
  var ROW_FIELDS = { host: 1, state: 1, ageS: 1, quota: 1, account: 1, accounts: 1 };
  // Where the heartbeats came from, in words (the report's `source`).
  var SOURCE_WORDS = { demo: "of the demo's simulated fleet", tracker: "from the tracker",
                       prometheus: "from Prometheus", mirror: "from the mirror" };

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function duration(seconds) {
    // The dashboard's one way: "2d 6h", "1h 58m", "7m 5s", "30s" (a zero second part left out).
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return "?";
    var s = Math.max(0, Math.floor(seconds)), d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600),
        m = Math.floor(s % 3600 / 60), sec = s % 60;
    // A no-break space inside: a narrow cell wraps around a duration, never inside it.
    if (d > 0) return d + "d" + (h ? "\u00a0" + h + "h" : "");
    if (h > 0) return h + "h" + (m ? "\u00a0" + m + "m" : "");
    if (m > 0) return m + "m" + (sec ? "\u00a0" + sec + "s" : "");
    return sec + "s";
  }

  function msOf(iso) {
    var t = typeof iso === "string" ? Date.parse(iso) : NaN;
    return isFinite(t) ? t : null;
  }

  function elapsedS() { return fetchedAt ? (Date.now() - fetchedAt) / 1000 : 0; }

  // A reading stamped more than a minute after the fleet was read (`suspect`) comes from a clock
  // that runs fast: how old it is nobody can tell, so it is greyed and says so, never shown as current.
  var SUSPECT_NOTE = "dated in the future: a clock runs fast";
  var SUSPECT_TITLE = "This reading is stamped later than the fleet was read, so the host that took it has a " +
                      "clock that runs fast and its age is unknown. A reading with a believable time always " +
                      "comes first.";

  function suspectMark(cls, text) {
    var mark = el("span", cls + " suspect", text);
    mark.title = SUSPECT_TITLE;
    return mark;
  }

  // Every countdown and age moves each second between reads, from the instant it counts to (a
  // reset) or from (the read): each is a text node and the function that writes it. Past
  // MAX_TICKING of them (a fleet of thousands) they move at each read instead.
  var MAX_TICKING = 4000;
  var tickers = [];
  function ticking(node, write) {
    node.textContent = write();
    tickers.push([node, write]);
  }
  function tick() {
    if (tickers.length > MAX_TICKING) return;
    tickers.forEach(function (t) {
      var words = t[1]();
      if (t[0].textContent !== words) t[0].textContent = words;
    });
    tickStopped();
  }

  function pill(word) {
    var text = typeof word === "string" && word ? word : "unknown";
    return el("span", "pill pill-" + (STATE_ORDER.hasOwnProperty(text) || /^[a-z_]+$/.test(text) ? text : "unknown"), text);
  }

  function windowCell(pct, resetsAt, label) {
    var cell = el("div", "win");
    if (typeof pct !== "number") {
      cell.appendChild(el("span", "win-text none", "—"));
      return cell;
    }
    var bar = el("div", "bar");
    bar.setAttribute("role", "progressbar");
    bar.setAttribute("aria-valuemin", "0");
    bar.setAttribute("aria-valuemax", "100");
    bar.setAttribute("aria-valuenow", String(Math.round(Math.max(0, Math.min(100, pct)) * 10) / 10));
    bar.setAttribute("aria-valuetext", pctText(pct));
    bar.setAttribute("aria-label", label || "window");
    var fill = el("div", "fill" + (pct >= 100 ? " bad" : pct >= 80 ? " warn" : ""));
    fill.style.width = Math.max(0, Math.min(100, pct)) + "%";
    bar.appendChild(fill);
    cell.appendChild(bar);
    // The window's name in the text too: the stacked layout of a narrow screen has no column headers.
    var text = (/5-hour/.test(label || "") ? "5h " : /7-day/.test(label || "") ? "7d " : "") + pctText(pct);
    var reset = msOf(resetsAt);
    var words = el("span", "win-text", text);
    if (reset !== null) {
      ticking(words, function () { return text + " · resets in " + duration((reset - Date.now()) / 1000); });
    }
    cell.appendChild(words);
    return cell;
  }

  function bindingReset(account) {
    // The wall matters against the reset of the window that binds; the sooner one stands in.
    var five = msOf(account.five_hour_resets_at), seven = msOf(account.seven_day_resets_at);
    if (five !== null && seven !== null) return Math.min(five, seven);
    return five !== null ? five : seven;
  }

  function wallCell(account) {
    var cell = el("span", "wall");
    var wall = account ? msOf(account.wall_at) : null;
    if (wall === null) {
      cell.className += " none";
      cell.textContent = "no forecast";
      cell.title = "Not enough recent readings for a forecast, or the account is not being used up.";
      return cell;
    }
    var reset = bindingReset(account);
    if (reset !== null && wall >= reset) {
      cell.textContent = "not before its reset";
      cell.className += " none";
    } else {
      ticking(cell, function () {
        var secs = (wall - Date.now()) / 1000;
        return secs <= 0 ? "at 100% now" : "100% in " + duration(secs);
      });
      cell.className += " alarm";
    }
    cell.title = "wall forecast " + account.wall_at;
    return cell;
  }

  function pctText(p) {
    // One rule on every surface (the terminals' too): to the nearest tenth, halves up, a trailing
    // ".0" dropped, none below 0, and past the limit "100%+" (no "101%").
    if (typeof p !== "number" || !isFinite(p)) return "—";
    return p > 100 ? "100%+" : (Math.round(Math.max(0, p) * 10) / 10) + "%";
  }

  function displayName(vendor) {
    return typeof vendor.displayName === "string" && vendor.displayName ? vendor.displayName : vendor.name;
  }

  function vendorNamed(name) {
    for (var i = 0; i < vendors.length; i++) if (vendors[i].name === name) return vendors[i];
    return null;
  }

  function activeBlocks(host) {
    // Each vendor's active account on the host, in the vendors' order: the default vendor's is the
    // row's `account`, every other one's the block named after the vendor (absent without its accounts).
    // Before the vendor list is read, the row's `account` is all the page knows.
    if (!vendors.length) return host.account ? [{ vendor: null, block: host.account }] : [];
    var found = [];
    vendors.forEach(function (v) {
      if (v.name !== defaultName && ROW_FIELDS.hasOwnProperty(v.name)) return;
      var block = v.name === defaultName ? host.account : host[v.name];
      if (block && typeof block === "object" && !Array.isArray(block)) found.push({ vendor: v, block: block });
    });
    return found;
  }

  function vendorLine(acct, vendor, block) {
    // Another vendor's active account on the host, on its own line under the default vendor's.
    var line = el("span", "vendor-acct" + (block.stale ? " stale-acct" : ""));
    line.appendChild(el("span", "vendor", displayName(vendor)));
    line.appendChild(el("span", "label", block.label || "(no label)"));
    line.appendChild(pill(block.status));
    line.appendChild(el("span", "win-text", "5h " + pctText(block.five_hour_pct) + " · 7d " + pctText(block.seven_day_pct)));
    acct.appendChild(line);
  }

  function otherLines(acct, host) {
    activeBlocks(host).forEach(function (found) {
      if (found.vendor && found.vendor.name !== defaultName) vendorLine(acct, found.vendor, found.block);
    });
  }

  function accountCells(host) {
    var account = host.account;
    var acct = el("div", "acct");
    if (!account) {
      acct.appendChild(el("span", "none", host.state === "live" || host.state === "stale" ? "no account data" : "—"));
      if (host.quota && typeof host.quota.five_hour_pct === "number") {
        acct.appendChild(el("span", "stale-note", "login 5h " + pctText(host.quota.five_hour_pct)));
      }
      otherLines(acct, host);
      return [acct, windowCell(null), windowCell(null), wallCell(null)];
    }
    // With another vendor's account under it, the default vendor's says whose it is too.
    var own = vendorNamed(defaultName);
    if (own && activeBlocks(host).length > 1) acct.appendChild(el("span", "vendor", displayName(own)));
    acct.appendChild(el("span", "label", account.label || "(no label)"));
    acct.appendChild(pill(account.status));
    var who = (host.host || "host") + " " + (account.label || "");
    var cells = [acct, windowCell(account.five_hour_pct, account.five_hour_resets_at, who + " 5-hour window"),
                 windowCell(account.seven_day_pct, account.seven_day_resets_at, who + " 7-day window"), wallCell(account)];
    var note = account.suspect === true ? suspectMark("stale-note", SUSPECT_NOTE)
             : account.stale ? el("span", "stale-note", "last reading " + duration((account.age_s || 0) + elapsedS()) + " ago")
             : null;
    if (note) {
      acct.appendChild(note);
      for (var i = 1; i < cells.length; i++) cells[i].className += " stale";
      acct.className += " stale-acct";
    }
    otherLines(acct, host);
    return cells;
  }

  function row(host) {
    var r = el("div", "row");
    r.setAttribute("role", "row");
    r.dataset.state = host.state;
    if (!activeBlocks(host).length && !(host.quota && typeof host.quota.five_hour_pct === "number")) {
      r.className += " no-acct";
    }
    var age = el("span", "age", "—");
    if (host.ageS !== null && host.ageS !== undefined) {
      ticking(age, function () { return duration(host.ageS + elapsedS()) + " ago"; });
    }
    var cells = [pill(host.state), el("span", "host", host.host), age];
    cells = cells.concat(accountCells(host));
    cells.forEach(function (c) { c.setAttribute("role", "cell"); r.appendChild(c); });
    return r;
  }

  // Urgency, the same for accounts and hosts: an exhausted account first, then the soonest wall.
  function urgency(status, wallAt) {
    var wall = msOf(wallAt);
    return [status === "rejected" ? 0 : 1, wall === null ? Infinity : wall];
  }

  function compareUrgency(a, b) {
    if (a[0] !== b[0]) return a[0] - b[0];
    if (a[1] !== b[1]) return a[1] < b[1] ? -1 : 1;
    return 0;
  }

  function hostUrgency(host) {
    // The most urgent of the host's active accounts, whichever vendor's.
    var most = urgency(null, null);
    activeBlocks(host).forEach(function (found) {
      var u = urgency(found.block.status, found.block.wall_at);
      if (compareUrgency(u, most) < 0) most = u;
    });
    return most;
  }

  function sorted(hosts) {
    return hosts.slice().sort(function (a, b) {
      var u = compareUrgency(hostUrgency(a), hostUrgency(b));
      if (u) return u;
      var sa = STATE_ORDER.hasOwnProperty(a.state) ? STATE_ORDER[a.state] : 9;
      var sb = STATE_ORDER.hasOwnProperty(b.state) ? STATE_ORDER[b.state] : 9;
      if (sa !== sb) return sa - sb;
      return String(a.host) < String(b.host) ? -1 : String(a.host) > String(b.host) ? 1 : 0;
    });
  }

  // ---------------------------------------------------------------- the accounts table

  function td(label, child, cls) {
    var cell = el("td", cls);
    cell.setAttribute("role", "cell");
    cell.dataset.label = label;  // the narrow layout's heading for the cell
    if (child) cell.appendChild(child);
    return cell;
  }

  function readOn(win) {
    var probed = win ? msOf(win.probedAt) : null;
    if (probed === null) return null;
    if (win.suspect === true) return suspectMark("read-on", (win.host ? "read on " + win.host + ", " : "") + SUSPECT_NOTE);
    var node = el("span", "read-on");
    ticking(node, function () {
      return "read " + duration((Date.now() - probed) / 1000) + " ago" + (win.host ? " on " + win.host : "");
    });
    return node;
  }

  function accountWindow(win, name, who) {
    var cell = windowCell(win ? win.pct : null, win ? win.resetsAt : null, who + " " + name + " window");
    if (win && win.suspect === true) cell.className += " stale";
    var read = readOn(win);
    if (read) cell.appendChild(read);
    return cell;
  }

  // An account's health (docs/posture.md): shown beside its status only when it is not ok, in the
  // dashboard's few words; ok says nothing more than the figures do.
  var HEALTH_WORDS = { refused: "token refused", limited: "reading rate-limited", unreachable: "provider unreachable",
                       stale: "no fresh reading", unread: "not read yet" };

  function healthPill(health) {
    if (typeof health !== "string" || health === "ok" || !HEALTH_WORDS.hasOwnProperty(health)) return null;
    var mark = el("span", "pill pill-health pill-" + health, HEALTH_WORDS[health]);
    mark.title = "health: " + health;
    return mark;
  }

  function statusCell(account) {
    var box = el("span", "acct-status");
    box.appendChild(pill(account.status));
    var health = healthPill(account.health);
    if (health) box.appendChild(health);
    return box;
  }

  function hostWords(h) {
    var said = [];
    if (h.active) said.push("active");
    if (typeof h.health === "string" && HEALTH_WORDS.hasOwnProperty(h.health)) said.push(HEALTH_WORDS[h.health]);
    return h.host + (said.length ? " (" + said.join(", ") + ")" : "");
  }

  function accountRow(account) {
    var tr = el("tr", "acct-row");
    tr.setAttribute("role", "row");
    tr.dataset.status = account.status || "unknown";
    tr.dataset.health = typeof account.health === "string" ? account.health : "unknown";
    var labels = Array.isArray(account.labels) ? account.labels.join(" · ") : "";
    var name = el("th", "acct-name");
    name.setAttribute("scope", "row");
    name.setAttribute("role", "rowheader");
    name.appendChild(el("span", "label", labels || "(no label)"));
    // Accounts of the default vendor go unmarked, as on the host rows; every other says its vendor.
    if (account.provider && defaultName !== null && account.provider !== defaultName) {
      var vendor = vendorNamed(account.provider);
      name.appendChild(el("span", "vendor", vendor ? displayName(vendor) : account.provider));
    }
    var key = el("span", "key", account.key ? "key " + account.key : "no email known: this host's only");
    key.title = account.key ? "The same login has this key on every host, whatever its label there."
                            : "Without the account's email nothing tells whether another host uses the same login.";
    name.appendChild(key);
    tr.appendChild(name);
    tr.appendChild(td("Status", statusCell(account)));
    var who = labels || "account";
    tr.appendChild(td("5-hour window", accountWindow(account.fiveHour, "5-hour", who)));
    tr.appendChild(td("7-day window", accountWindow(account.sevenDay, "7-day", who)));
    var resets = {five_hour_resets_at: account.fiveHour && account.fiveHour.resetsAt,
                  seven_day_resets_at: account.sevenDay && account.sevenDay.resetsAt, wall_at: account.wallAt};
    tr.appendChild(td("Reaches 100 %", wallCell(resets)));
    var hosts = (Array.isArray(account.hosts) ? account.hosts : []).map(hostWords);
    tr.appendChild(td("Hosts", el("span", "acct-hosts", hosts.join(", ") || "—")));
    return tr;
  }

  function renderAccounts(body) {
    tickers = tickers.filter(function (t) { return !document.getElementById("account-rows").contains(t[0]); });
    var box = document.getElementById("accounts-box");
    var accounts = body && Array.isArray(body.accounts) ? body.accounts : null;
    box.hidden = accounts === null || (!accounts.length && !!(body && body.error));
    if (accounts === null) return;
    var frag = document.createDocumentFragment();
    accounts.forEach(function (a) { frag.appendChild(accountRow(a)); });
    document.getElementById("account-rows").replaceChildren(frag);
    document.getElementById("accounts").hidden = accounts.length === 0;
    document.getElementById("accounts-empty").hidden = accounts.length > 0;
  }

  // ---------------------------------------------------------------- which host takes a ticket

  // The contract's ticket identifier (docs/liveness.md); the monitor checks it again.
  var TICKET_RE = /^[A-Za-z][A-Za-z0-9]*-[0-9]+$/;
  var askedTicket = null;    // the ticket asked about, from the form or the page's ?ticket=
  var askedProvider = null;  // the vendor asked about (null: the default one)

  function fillProviders() {
    // The vendors from /api/vendors, once: the page names none itself.
    var select = document.getElementById("owner-provider");
    if (!vendors.length || select.options.length) return;
    vendors.forEach(function (v) {
      var opt = el("option", null, displayName(v));
      opt.value = v.name;
      opt.selected = v.name === (askedProvider || defaultName);
      select.appendChild(opt);
    });
  }

  function ownerProblem(text) {
    var box = document.getElementById("owner-result");
    box.replaceChildren(el("p", "owner-problem", text));
  }

  function ownerLine(body, skipped, found) {
    var line = el("p", "owner-line");
    var vendor = vendorNamed(body.provider);
    var whose = vendor ? displayName(vendor) : body.provider;
    if (!body.owner) {
      line.textContent = "No host can take " + body.ticket + ": the roster is empty.";
      return line;
    }
    if (found) {
      line.appendChild(document.createTextNode(body.ticket + " goes to "));
      line.appendChild(el("b", "owner-host", body.owner));
      line.appendChild(document.createTextNode(skipped.length
        ? ", around " + skipped.length + (skipped.length === 1 ? " host" : " hosts") + " without headroom for " + whose + "."
        : ": it has headroom for " + whose + "."));
      return line;
    }
    line.className += " alarm";
    var until = msOf(body.waitUntil);
    line.textContent = "No host has headroom for " + whose + ": " + body.ticket + " stays with the contract's owner, " +
      body.owner + (until !== null ? "; the first holding window resets in " + duration((until - Date.now()) / 1000) : "") + ".";
    return line;
  }

  function renderOwner(body) {
    var skipped = Array.isArray(body.skipped) ? body.skipped : [];
    var found = !!body.owner && !skipped.some(function (s) { return s.host === body.owner; });
    var box = document.getElementById("owner-result");
    var frag = document.createDocumentFragment();
    frag.appendChild(ownerLine(body, skipped, found));
    if (skipped.length) {
      var list = el("ul", "owner-skipped");
      list.setAttribute("aria-label", "hosts skipped");
      skipped.forEach(function (s) { list.appendChild(el("li", null, s.host + " — " + s.reason)); });
      frag.appendChild(list);
    }
    if (body.livenessKnown === false) {
      frag.appendChild(el("p", "muted", "Liveness is unknown: every roster host is a candidate."));
    }
    box.replaceChildren(frag);
    box.dataset.owner = body.owner || "";
    box.dataset.found = found ? "true" : "false";
  }

  function askOwner() {
    if (!askedTicket) return;
    var query = "?ticket=" + encodeURIComponent(askedTicket) +
                (askedProvider ? "&provider=" + encodeURIComponent(askedProvider) : "");
    fetch("/api/fleet/owner" + query, { cache: "no-store", headers: { Accept: "application/json" } })
      .then(function (r) {
        return r.json().then(function (body) { return { status: r.status, body: body }; });
      })
      .then(function (answer) {
        if (answer.status === 200) renderOwner(answer.body);
        else ownerProblem(answer.body && answer.body.message ? answer.body.message : "HTTP " + answer.status);
      })
      .catch(function (err) { ownerProblem("Cannot ask /api/fleet/owner from this monitor: " + err.message); });
  }

  function onOwnerForm(ev) {
    ev.preventDefault();
    var ticket = document.getElementById("owner-ticket").value.trim();
    var select = document.getElementById("owner-provider");
    if (!TICKET_RE.test(ticket)) {
      ownerProblem("A ticket is a tracker identifier like ENG-123: letters and digits, a dash, then digits.");
      return;
    }
    askedTicket = ticket;
    askedProvider = select.value && select.value !== defaultName ? select.value : null;
    // The page's address names the ticket, so that it can be shared or reloaded.
    var search = "?ticket=" + encodeURIComponent(ticket) + (askedProvider ? "&provider=" + encodeURIComponent(askedProvider) : "");
    if (window.history && history.replaceState) history.replaceState(null, "", search);
    askOwner();
  }

  function readAskedTicket() {
    var params = new URLSearchParams(window.location.search);
    var ticket = params.get("ticket");
    askedProvider = params.get("provider") || null;
    if (ticket && TICKET_RE.test(ticket)) {
      askedTicket = ticket;
      document.getElementById("owner-ticket").value = ticket;
    }
  }

  function renderCounts(hosts, unlisted) {
    var box = document.getElementById("counts");
    box.replaceChildren();
    var total = el("span", "count");
    total.appendChild(el("b", null, hosts.length));
    total.appendChild(document.createTextNode(" hosts"));
    box.appendChild(total);
    STATES.forEach(function (state) {
      var n = hosts.filter(function (h) { return h.state === state; }).length;
      if (!n && state === "unknown") return;
      var c = el("span", "count count-" + state);
      c.dataset.state = state;
      c.appendChild(el("b", null, n));
      c.appendChild(document.createTextNode(" " + state));
      box.appendChild(c);
    });
    if (unlisted.length) {
      var u = el("span", "count count-unlisted");
      u.appendChild(el("b", null, unlisted.length));
      u.appendChild(document.createTextNode(" not in roster"));
      box.appendChild(u);
    }
  }

  function render(body) {
    tickers = tickers.filter(function (t) { return !document.getElementById("rows").contains(t[0]); });
    var hosts = Array.isArray(body.hosts) ? body.hosts : [];
    var unlisted = Array.isArray(body.unlisted) ? body.unlisted : [];
    var meta = "heartbeats " + (SOURCE_WORDS[body.source] || (body.source ? "from " + body.source : ""));
    if (body.generatedAt) meta += ", read at " + new Date(body.generatedAt).toLocaleTimeString();
    // The monitor's read is still running (a slow tracker): this is the last good one, not current.
    if (body.stale === true) meta += "; a newer read is slow, so these are " + duration(Number(body.staleAgeS) || 0) + " old";
    document.getElementById("meta").textContent = meta;
    renderCounts(hosts, unlisted);
    var notice = document.getElementById("notice");
    notice.hidden = !body.error;
    notice.textContent = body.error ? "Liveness is unknown, so every host shows unknown: " + body.error : "";
    var warning = document.getElementById("warning");
    warning.hidden = !body.warning;
    warning.textContent = body.warning ? "Warning: " + body.warning : "";
    var rows = document.getElementById("rows");
    var frag = document.createDocumentFragment();
    sorted(hosts).forEach(function (h) { frag.appendChild(row(h)); });
    rows.replaceChildren(frag);
    document.getElementById("empty").hidden = hosts.length > 0 || !!body.error;
    var box = document.getElementById("unlisted-box");
    var list = document.getElementById("unlisted");
    list.replaceChildren();
    unlisted.forEach(function (u) {
      list.appendChild(el("li", null, u.host + (typeof u.ageS === "number" ? " — heartbeat " + duration(u.ageS) + " ago" : "")));
    });
    box.hidden = unlisted.length === 0;
  }

  function getJson(path) {
    return fetch(path, { cache: "no-store", headers: { Accept: "application/json" } }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    });
  }

  function setVendors(body) {
    if (!body || !Array.isArray(body.vendors) || typeof body["default"] !== "string") return;
    defaultName = body["default"];
    vendors = body.vendors.filter(function (v) { return v && typeof v.name === "string" && v.name; });
  }

  // A monitor that stopped answering: after STOPPED_AFTER failed reads in a row (a failed read is
  // tried again after RETRY_MS) the page says so and greys what it shows, the last answer's.
  var STOPPED_AFTER = 3, RETRY_MS = 5000;
  var failedReads = 0, lostAt = 0;

  function answered() {
    failedReads = 0;
    lostAt = 0;
    document.body.classList.remove("monitor-stopped");
  }

  function unanswered(err) {
    if (!lostAt) lostAt = Date.now();
    failedReads++;
    var notice = document.getElementById("notice");
    notice.hidden = false;
    if (failedReads < STOPPED_AFTER) {
      notice.textContent = "Cannot read /api/fleet from this monitor: " + err.message + "; trying again.";
      return;
    }
    document.body.classList.add("monitor-stopped");
    tickStopped();
  }

  function tickStopped() {
    if (failedReads < STOPPED_AFTER) return;
    document.getElementById("notice").textContent = "The monitor stopped answering " +
      duration((Date.now() - lostAt) / 1000) + " ago (" + new Date(lostAt).toLocaleTimeString() + "), after " +
      failedReads + " failed reads. What this page shows is its last answer; the page keeps trying, and " +
      "fills in again when the monitor is back.";
  }

  function load() {
    // Both answer from one cached read of the fleet; an older monitor without the accounts view
    // still shows its hosts. The vendor list names each vendor's block and how to write it.
    var accounts = getJson("/api/fleet/accounts").catch(function () { return null; });
    var named = getJson("/api/vendors").catch(function () { return null; });
    Promise.all([getJson("/api/fleet"), accounts, named])
      .then(function (bodies) {
        fetchedAt = Date.now();
        answered();
        setVendors(bodies[2]);
        fillProviders();
        renderAccounts(bodies[1]);
        render(bodies[0]);
        askOwner();
        later(REFRESH_MS);
      })
      .catch(function (err) {
        unanswered(err);
        later(RETRY_MS);
      });
  }

  var timer = null, clock = null;

  function later(ms) {
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(load, ms);
  }

  function start() {
    if (clock === null) clock = setInterval(tick, 1000);
    load();
  }

  function stop() {
    if (timer !== null) clearTimeout(timer);
    if (clock !== null) clearInterval(clock);
    timer = clock = null;
  }

  document.addEventListener("DOMContentLoaded", function () {
    readAskedTicket();
    document.getElementById("owner-form").addEventListener("submit", onOwnerForm);
    start();
  });
  // A page left in the browser's back-forward cache keeps no request running; back on
  // it, it reads the fleet again at once.
  window.addEventListener("pagehide", stop);
  window.addEventListener("pageshow", function (ev) { if (ev.persisted) start(); });
})();
