// svc-monitor dashboard: live from /api/accounts/stream, no build step, no CDN.
// Everything is written with textContent: emails and labels are never parsed as HTML.
(function () {
  "use strict";
  var STREAM = "/api/accounts/stream";
  var last = null;          // newest body shown
  var source = null;        // current EventSource
  var reconnectTimer = null;

  function $(id) { return document.getElementById(id); }
  function text(id, value) { $(id).textContent = value == null ? "" : String(value); }

  function fmtPct(p) { return typeof p === "number" ? (Math.round(p * 10) / 10) + "%" : "—"; }
  function fmtDuration(ms) {
    if (ms <= 0) return "now";
    var s = Math.floor(ms / 1000), d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600),
        m = Math.floor(s % 3600 / 60), sec = s % 60;
    if (d > 0) return d + "d " + h + "h";
    if (h > 0) return h + "h " + m + "m";
    if (m > 0) return m + "m " + sec + "s";
    return sec + "s";
  }
  function countdown(iso) {
    if (!iso) return "";
    var t = Date.parse(iso);
    return isNaN(t) ? "" : "resets in " + fmtDuration(t - Date.now());
  }
  function windowText(w) {
    if (!w) return "—";
    var c = countdown(w.resetsAt);
    return fmtPct(w.pct) + (c ? " · " + c : "");
  }

  function setBar(key, w) {
    var fill = $("bar-" + key + "-fill");
    var pct = w && typeof w.pct === "number" ? Math.max(0, Math.min(100, w.pct)) : 0;
    fill.style.width = pct + "%";
    fill.className = "fill" + (w && w.status ? " " + w.status : "");
    text("bar-" + key + "-text", w ? windowText(w) : "");
  }

  function clearDisplay() {
    text("footer-label", "—");
    text("footer-email", "");
    var pill = $("footer-status");
    pill.textContent = "unavailable";
    pill.className = "pill pill-unavailable";
    setBar("5h", null);
    setBar("7d", null);
    $("banner").hidden = true;
    $("node-error").hidden = true;
    $("accounts-body").textContent = "";
    text("meta", "");
  }

  function render(body) {
    last = body;
    text("node", body && body.node ? "· " + body.node : "");
    if (!body || body.available !== true) {
      clearDisplay();
      $("unavailable").hidden = false;
      $("accounts").hidden = true;
      return;
    }
    $("unavailable").hidden = true;
    $("accounts").hidden = false;
    var active = body.active;
    var status = body.status || "unknown";
    text("footer-label", active ? active.label : "no active account");
    text("footer-email", active && active.email ? active.email : "");
    var pill = $("footer-status");
    pill.textContent = status;
    pill.className = "pill pill-" + status;
    setBar("5h", active ? active.fiveHour : null);
    setBar("7d", active ? active.sevenDay : null);

    var banner = $("banner");
    if (status === "rejected") {
      var sib = body.siblingWithHeadroom;
      var msg = (active ? active.label : "The active account") + " is exhausted" +
        (active && active.bindingWindow ? " (" + active.bindingWindow + " window)" : "") + ". ";
      msg += sib ? "Switch to " + sib.label + (sib.email ? " (" + sib.email + ")" : "") + ", which has headroom."
                 : "No sibling account has headroom.";
      text("banner-text", msg);
      banner.hidden = false;
    } else {
      banner.hidden = true;
    }

    var nodeErr = $("node-error");
    if (body.error) {
      nodeErr.textContent = "Probe failed (" + body.error.kind + "): " + (body.error.message || "");
      nodeErr.hidden = false;
    } else {
      nodeErr.hidden = true;
    }

    var tbody = $("accounts-body");
    tbody.textContent = "";
    (body.accounts || []).forEach(function (a) {
      var tr = document.createElement("tr");
      if (a.active) tr.className = "active";
      tr.setAttribute("data-label", a.label);
      var err = a.error ? a.error.kind + (a.error.message ? ": " + a.error.message : "") : "";
      var st = a.bindingStatus || a.overallStatus || "";
      [a.label + (a.active ? " (active)" : ""), a.email || "", st, windowText(a.fiveHour),
       windowText(a.sevenDay), a.bindingWindow || "", err].forEach(function (v) {
        var td = document.createElement("td");
        td.textContent = v;
        tr.appendChild(td);
      });
      tbody.appendChild(tr);
    });
    var probed = typeof body.probedAt === "number" ? new Date(body.probedAt) : null;
    text("meta", (probed ? "probed " + fmtDuration(Date.now() - body.probedAt) + " ago (" +
      probed.toISOString() + ")" : "") + (body.cached ? " · cached" : " · fresh"));
  }

  function tick() {
    // Countdowns and "probed ago" move every second without a new frame.
    if (last && last.available === true) {
      var a = last.active;
      text("bar-5h-text", a && a.fiveHour ? windowText(a.fiveHour) : "");
      text("bar-7d-text", a && a.sevenDay ? windowText(a.sevenDay) : "");
      if (typeof last.probedAt === "number") {
        text("meta", "probed " + fmtDuration(Date.now() - last.probedAt) + " ago (" +
          new Date(last.probedAt).toISOString() + ")" + (last.cached ? " · cached" : " · fresh"));
      }
    }
  }

  function setConn(state) {
    var el = $("conn");
    el.textContent = state;
    el.className = "conn conn-" + state;
  }

  function connect() {
    if (reconnectTimer) { clearTimeout(reconnectTimer); reconnectTimer = null; }
    if (source) source.close();
    setConn("connecting");
    source = new EventSource(STREAM);
    source.addEventListener("open", function () { setConn("live"); });
    source.addEventListener("account", function (ev) {
      setConn("live");
      try { render(JSON.parse(ev.data)); } catch (e) { text("message", "Bad frame from the stream."); }
    });
    source.addEventListener("error", function () {
      setConn("reconnecting");
      // The browser retries by itself after `retry:`; when it gives up (the
      // stream ended with an error status) start a fresh one.
      if (source.readyState === EventSource.CLOSED && !reconnectTimer) {
        reconnectTimer = setTimeout(connect, 5000);
      }
    });
  }

  function forceRefresh() {
    var btn = $("refresh");
    btn.disabled = true;
    text("message", "Probing…");
    fetch("/api/accounts?refresh=true", { headers: { "X-Svc-Refresh": "1" }, cache: "no-store" })
      .then(function (r) { return r.json().then(function (j) { return { status: r.status, body: j }; }); })
      .then(function (res) {
        if (res.status === 200) {
          render(res.body);
          text("message", res.body.cached ? "Refreshed recently; showing the last probe." : "Refreshed.");
        } else {
          text("message", "Refresh refused: " + (res.body.message || res.status));
        }
      })
      .catch(function () { text("message", "Refresh failed: monitor unreachable."); })
      .then(function () { btn.disabled = false; });
  }

  document.addEventListener("DOMContentLoaded", function () {
    $("refresh").addEventListener("click", forceRefresh);
    fetch("/api/accounts", { cache: "no-store" })
      .then(function (r) { return r.json(); })
      .then(function (body) { if (!last) render(body); })
      .catch(function () {});
    connect();
    setInterval(tick, 1000);
  });
})();
