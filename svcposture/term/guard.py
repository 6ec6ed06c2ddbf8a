"""svc-monitor guard: may automation start another run now? (docs/steering.md)

    svc-monitor guard && run-agent

It asks the local monitor as the status line does (a cached plain read of
/api/accounts, never the provider), within 250 ms of its start unless
`--wait`, and decides from the posture body alone (headroom.guard_decision):

- exit 0, go;
- exit 1, hold: the account (default: the active one) is rejected, or any of
  its windows (extra windows included) is at or above 100 - reserve percent;
  the line then says when that window resets and what the advice names under
  the reserve of the call (the monitor's /api/advice when it used the same
  reserve, else the same function over its posture and forecasts);
- exit 69 (EX_UNAVAILABLE): the monitor did not answer, what answered is not
  the monitor's posture, the posture is unavailable or failed, older than
  twice the probe interval or more than 60 s in the future, the account's
  health is not `ok` (its token refused: the line is the advice's note, with
  the fix), or it has a window whose pct cannot be read or no readable window
  at all (no go on doubt); with `--fail-open` that is exit 0 (a gate that must
  never stop the work);
- exit 2, bad usage, and an --account the posture does not have (the known
  labels are listed; --wait does not wait it out).

A node with no usable accounts file is judged on this machine's own login
(GET /api/login), as the status line shows it. One reason line goes to stderr;
`--json` prints the decision on stdout. `--wait S` follows /api/accounts/stream
and exits 0 on the first frame that says go, else after S seconds with the last
decision (1 for hold); it writes one more line at once when it starts to wait
(what holds, until when), so a dispatcher's log never looks hung.

Only the C socket layer and the plain-socket client of svcposture._http are
imported, so a decision costs little more than the interpreter's start.
"""
from __future__ import annotations

import os
import sys
import time

from .._http import MAX_BODY, get_json, open_socket, parse_url
from .._reserve import ReserveError, parse_reserve_text, reserve_pct
from .._text import loads_bounded, printable
from ..steering.headroom import (
    GO, HOLD, NO_ANSWER, UNAVAILABLE, UNKNOWN_ACCOUNT, guard_decision, login_decision, resets_ms,
)
from ..settings import MONITOR_START_HINT, guard_budget_ms, quota_interval_s
from ..vendors import DEFAULT_PROVIDER, with_provider
from . import line
from .statusline import MIN_MONITOR_S, monitor_url, process_age_s

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

EX_UNAVAILABLE = 69
EXIT_OF = {GO: 0, HOLD: 1, UNAVAILABLE: EX_UNAVAILABLE, UNKNOWN_ACCOUNT: 2}
# A decision that ends --wait at once: go, or an account the posture does not have.
_FINAL = (GO, UNKNOWN_ACCOUNT)
MAX_WAIT_S = 7 * 86400
RECONNECT_S = 0.5
# The hold line's advice is one more cached read; a go never waits for it.
ADVICE_BUDGET_S = 1.0

HELP = """\
usage: svc-monitor guard [--provider P] [--account LABEL] [--reserve PCT] [--wait S]
                         [--fail-open] [--json] [--url URL]

May automation start another run now? A gate for scripts, dispatchers and the
coding agent's pre-run hook:

  svc-monitor guard && run-agent

It reads the local monitor (a cached read; it never calls the provider and
never prints a token) within 250 ms ($SVC_GUARD_BUDGET_MS changes that), and exits
  0   go
  1   hold: the account is rejected, or any window (extra windows included) is
      at or above 100 - reserve %; the line says when that window resets and
      what the advice names under the reserve of the call
  69  unavailable: no monitor, a reply that is not its posture, a failed probe,
      a posture older than twice the probe interval ($SVC_PROBE_INTERVAL_S, 300)
      or from the future, an account that was not read (its token refused: the
      line says the fix), a window whose pct cannot be read, or no readable
      window at all; 0 with --fail-open
  2   bad usage, or an --account this node does not have (the known ones listed)
and says why in one line on stderr. A node with no usable accounts file is judged
on this machine's own coding-agent login, as the status line shows it.

options:
  --provider P     {providers}: whose accounts to judge
  --account LABEL  judge this account instead of the active one
  --reserve PCT    the human reserve for this call, 0-50 (default: the node's
                   svc.posture.reservePct, else 0): automation holds once a
                   window reaches 100 - PCT %
  --wait S         follow the monitor's stream for up to S seconds; exit 0 as
                   soon as the decision is go, else the last decision (1 for hold);
                   one line at once says what holds and until when
  --fail-open      exit 0 when the monitor is unavailable (one line on stderr)
  --json           print {decision, account, provider, reason, window, pct,
                   reservePct, resetsAt, retryAfterS} on stdout
  --url URL        monitor base URL (default: 127.0.0.1 at $SVC_MONITOR_PORT and
                   $SVC_MONITOR_BIND when either is set, else the url in
                   ~/svc/run/monitor.json, else http://127.0.0.1:7400)
  -h, --help       show this help
"""

_WITH_VALUE = ("--provider", "--account", "--reserve", "--wait", "--url")


def help_text() -> str:
    """HELP with the registered vendors' names, the default one marked."""
    from ..vendors import provider_names

    names = ["%s (default)" % name if name == DEFAULT_PROVIDER else name for name in provider_names()]
    listed = names[0] if len(names) == 1 else "%s or %s" % (", ".join(names[:-1]), names[-1])
    return HELP.replace("{providers}", listed)


def parse_args(argv: "Sequence[str]") -> "Tuple[Dict[str, Any], Optional[str]]":
    """({option: value}, error): hand-parsed, as argparse would cost more than a decision."""
    opts: "Dict[str, Any]" = {"provider": DEFAULT_PROVIDER, "account": None, "reserve": None, "wait": None,
                              "fail_open": False, "json": False, "url": None, "help": False}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if arg in ("-h", "--help"):
            opts["help"] = True
            return opts, None
        if arg in ("--fail-open", "--json"):
            opts[arg[2:].replace("-", "_")] = True
            continue
        if name not in _WITH_VALUE:
            return opts, "unknown argument %r" % printable(arg[:40])
        if not eq:
            if not args:
                return opts, "%s needs a value" % name
            value = args.pop(0)
        opts[name[2:]] = value
    return opts, _check(opts)


def _check(opts: "Dict[str, Any]") -> "Optional[str]":
    from ..vendors import names_text, provider_names

    if opts["provider"] != DEFAULT_PROVIDER and opts["provider"] not in provider_names():
        return "--provider must be " + names_text()
    if opts["reserve"] is not None:
        pct = parse_reserve_text(opts["reserve"])
        if pct is None:
            return "--reserve must be an integer from 0 to 50"
        opts["reserve"] = pct
    if opts["wait"] is not None:
        try:
            wait = float(opts["wait"])
        except ValueError:
            wait = -1.0
        if not 0 <= wait <= MAX_WAIT_S:
            return "--wait must be a number of seconds from 0 to %d" % MAX_WAIT_S
        opts["wait"] = wait
    if opts["url"] is not None and parse_url(opts["url"]) is None:
        return "--url must be http[s]://host[:port]"
    if opts["account"] is not None and not (0 < len(opts["account"]) <= 80):
        return "--account must be an account label"
    return None


def base_url(opts: "Mapping[str, Any]", environ: "Mapping[str, str]") -> str:
    """--url, else where every client looks (settings.monitor_url)."""
    return opts["url"] or monitor_url(environ)


def posture_path(provider: str, stream: bool = False) -> str:
    return with_provider("/api/accounts/stream" if stream else "/api/accounts", provider)


class Judge:
    """What the guard decides on: the options, the reserve and the staleness limits of a run.

    A node with no usable accounts file (its posture is the disabled body) is judged on this
    machine's own login (GET /api/login), as the status line shows it, for the default vendor."""

    def __init__(self, target: "Any", opts: "Mapping[str, Any]", reserve: int, environ: "Mapping[str, str]") -> None:
        self.target, self.opts, self.reserve, self.environ = target, opts, reserve, environ
        self.stale_ms = line.stale_after_ms(environ)
        self.login_stale_ms = int(line.STALE_INTERVALS * quota_interval_s(environ) * 1000)
        self.on_login = False  # whether the last decision was taken on the login

    def decide(self, body: "Any", deadline: float) -> "Dict[str, Any]":
        opts, now = self.opts, int(time.time() * 1000)
        result = guard_decision(body, provider=opts["provider"], account=opts["account"], reserve=self.reserve,
                                now_ms=now, stale_ms=self.stale_ms)
        self.on_login = False
        if (result["decision"] == UNAVAILABLE and opts["provider"] == DEFAULT_PROVIDER and opts["account"] is None
                and isinstance(body, dict) and body.get("available") is False and self.target is not None):
            login = get_json(self.target, "/api/login", max(deadline, time.monotonic() + MIN_MONITOR_S))
            judged = login_decision(login, provider=opts["provider"], reserve=self.reserve, now_ms=now,
                                    stale_ms=self.login_stale_ms)
            if judged is not None:
                self.on_login = True
                return judged
        return result


# ---------------------------------------------------------------- --wait: the stream

def _stream_socket(target: "Any", path: str, deadline: float) -> "Any":
    sock = open_socket(target, deadline)
    request = ("GET %s%s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n"
               "User-Agent: svc-monitor-guard\r\n\r\n" % (target.prefix, path, target.netloc))
    sock.sendall(request.encode("ascii", "replace"))
    return sock


def follow(target: "Any", path: str, deadline: float, on_body: "Any") -> None:
    """Feed each `account` frame's body to `on_body` until it returns True, the
    stream ends, or the deadline passes (socket.timeout). A line or a frame
    longer than a posture body may be fails the read (ValueError): a stream
    that never ends its frame must not grow the guard's memory."""
    sock = _stream_socket(target, path, deadline)
    try:
        buf = b""
        head_done = False
        event, data, frame_bytes = "", [], 0  # type: Tuple[str, List[str], int]
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                return
            buf += chunk
            if len(buf) > MAX_BODY:
                raise ValueError("an event-stream line over %d bytes" % MAX_BODY)
            if not head_done:
                if b"\r\n\r\n" not in buf:
                    continue
                head, _, buf = buf.partition(b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.") or head[9:12] != b"200":
                    return
                head_done = True
            while b"\n" in buf:
                raw, _, buf = buf.partition(b"\n")
                text = raw.rstrip(b"\r").decode("utf-8", "replace")
                if text == "":
                    if event == "account" and data and on_body("\n".join(data)):
                        return
                    event, data, frame_bytes = "", [], 0
                elif text.startswith("event:"):
                    event = text[6:].strip()
                elif text.startswith("data:"):
                    frame_bytes += len(raw)
                    if frame_bytes > MAX_BODY:
                        raise ValueError("an event-stream frame over %d bytes" % MAX_BODY)
                    data.append(text[5:].lstrip(" "))
    finally:
        sock.close()


# A node judged on its login gets no new stream frame when the login's reading changes: it is read again this often.
LOGIN_RECHECK_S = 5.0


def wait_for_go(judge: Judge, wait_s: float, say: "Any") -> "Tuple[Dict[str, Any], Any]":
    """(the decision, the posture body it was taken on) of `--wait`: go as soon as the stream says
    so, else the last decision after `wait_s`. The first decision that is not go goes to `say`
    at once (what holds, until when), so a dispatcher's log shows why it waits."""
    target, opts = judge.target, judge.opts
    deadline = time.monotonic() + wait_s
    latest: "List[Any]" = [None]  # the newest posture body the stream sent
    told: "List[bool]" = [False]

    def judged(body: "Any") -> "Dict[str, Any]":
        result = judge.decide(body, time.monotonic() + RECONNECT_S)
        if result["decision"] not in _FINAL and not told[0]:
            told[0] = True
            say(dict(result, reason=result["reason"] + hold_note(judge, body, result)))
        return result

    def on_body(text: str) -> bool:
        try:
            body = loads_bounded(text.encode("utf-8"), MAX_BODY)
        except ValueError:
            return False
        latest[0] = body
        # A decision taken on the login ends this stream: the login is read again after a pause.
        return judged(body)["decision"] in _FINAL or judge.on_login

    while time.monotonic() < deadline:
        try:
            if target is not None:
                follow(target, posture_path(opts["provider"], stream=True), deadline, on_body)
        except (OSError, ValueError, UnicodeError):
            pass
        result = judged(latest[0])
        if result["decision"] in _FINAL:
            return result, latest[0]
        pause = LOGIN_RECHECK_S if judge.on_login else RECONNECT_S
        time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
    # Judged again at the end: a frame that was fresh when it came may have aged past the limit.
    return judged(latest[0]), latest[0]


# ---------------------------------------------------------------- the command

def no_answer(url: str) -> str:
    """The reason when nothing answered at `url`: which URL, and how to start a monitor there."""
    return "the monitor at %s did not answer; %s" % (printable(url)[:200], MONITOR_START_HINT)


def run(argv: "Sequence[str]", environ: "Mapping[str, str]", started: float,
        say: "Any" = None) -> "Tuple[int, bytes, bytes]":
    """(exit status, stdout bytes, stderr bytes); `say(result)` is told at once when `--wait`
    starts to wait on a decision that is not go."""
    opts, error = parse_args(argv)
    if opts["help"]:
        return 0, help_text().encode("utf-8"), b""
    if error is not None:
        return 2, b"", ("svc-monitor guard: %s (see svc-monitor guard --help)\n" % error).encode("utf-8")
    reserve = opts["reserve"]
    if reserve is None:
        home = environ.get("HOME", "")
        try:
            reserve = reserve_pct(home) if home and os.path.isabs(home) else 0
        except ReserveError as exc:
            return 2, b"", ("svc-monitor guard: %s\n" % printable(exc)).encode("utf-8")
    url = base_url(opts, environ)
    judge = Judge(parse_url(url), opts, reserve, environ)
    waited_from = time.monotonic()
    held = [False]

    def told(result: "Dict[str, Any]") -> None:
        held[0] = True
        if say is not None:
            say(dict(result, reason=no_answer(url) if result["reason"] == NO_ANSWER else result["reason"]), opts)
    if opts["wait"]:
        result, body = wait_for_go(judge, opts["wait"], told)
    else:
        deadline = max(started + guard_budget_ms(environ) / 1000.0, time.monotonic() + MIN_MONITOR_S)
        body = get_json(judge.target, posture_path(opts["provider"]), deadline) if judge.target is not None else None
        result = judge.decide(body, deadline)
    if result["reason"] == NO_ANSWER:
        result["reason"] = no_answer(url)
    if result["decision"] == HOLD:
        result["reason"] += hold_note(judge, body, result)
    elif result["decision"] == UNAVAILABLE and judge.target is not None and result["account"] is not None \
            and not judge.on_login:
        result["reason"] = health_note(judge, result["account"], result["reason"], time.monotonic() + ADVICE_BUDGET_S)
    if opts["wait"] and result["decision"] not in _FINAL:
        result["reason"] += " (waited %s)" % line.duration(opts["wait"] * 1000)
    elif result["decision"] == GO and held[0]:
        result["reason"] += " (after waiting %s)" % line.duration((time.monotonic() - waited_from) * 1000)
    return report(result, opts)


def hold_note(judge: Judge, body: "Any", result: "Mapping[str, Any]") -> str:
    """What the hold line adds to the reason: when the holding window resets, and what the advice
    names for that account under this run's reserve (`--reserve` included)."""
    if result["decision"] != HOLD:
        return ""
    now = int(time.time() * 1000)
    at = resets_ms(result)
    note = "; resets in %s" % line.until(at, now) if at is not None else ""
    if judge.target is None or judge.on_login or not isinstance(body, dict):
        return note
    active = body.get("active") if isinstance(body.get("active"), dict) else None
    if active is None or active.get("label") != result.get("account"):
        return note
    advice = advice_for(judge, body, time.monotonic() + ADVICE_BUDGET_S)
    return note + line.advice_words(advice, body, now)


def advice_for(judge: Judge, body: "Mapping[str, Any]", deadline: float) -> "Any":
    """The advice on `body` under the run's reserve: the monitor's (/api/advice) when it was taken on
    the same probe with the same reserve, else the same function applied here to the posture and the
    monitor's forecasts (a `--reserve` of its own)."""
    provider = judge.opts["provider"]
    advice = get_json(judge.target, with_provider("/api/advice", provider), deadline)
    if isinstance(advice, dict) and advice.get("probedAt") == body.get("probedAt") \
            and advice.get("reservePct") == judge.reserve:
        return advice
    from ..settings import advice_wait_s
    from ..steering.advice import advise
    try:
        wait_s = advice_wait_s(judge.environ)
    except ValueError:
        wait_s = 600
    trajectory = get_json(judge.target, "/api/trajectory", deadline)
    return dict(advise(body, trajectory, provider=provider, reserve=judge.reserve, wait_s=wait_s,
                       now_ms=int(time.time() * 1000)), reservePct=judge.reserve)


def nobody_words(advice: "Mapping[str, Any]") -> str:
    """Why no other account can take over, in the advice's terms: "headroom" only of accounts
    that were read, every other one named with what keeps it out."""
    from ..steering.healthwords import SHORT
    ranked = [r for r in advice.get("ranked") or [] if isinstance(r, dict) and isinstance(r.get("label"), str)]
    unread = ["%s: %s" % (printable(r["label"][:80]), SHORT[r["health"]]) for r in ranked if r.get("health") in SHORT]
    if not unread:
        return "no other account has headroom"
    return "no other account can take over: %s" % "; ".join(unread)


def health_note(judge: Judge, label: str, reason: str, deadline: float) -> str:
    """The unavailable line of an account that was not read (a refused token, above all), as the
    monitor's advice says it: its note (with the fix) and what the advice names instead."""
    body = get_json(judge.target, with_provider("/api/advice", judge.opts["provider"]), deadline)
    if not isinstance(body, dict):
        return reason
    active = body.get("active") if isinstance(body.get("active"), dict) else {}
    entries = [active] + [r for r in body.get("ranked") or [] if isinstance(r, dict)]
    mine = next((e for e in entries if e.get("label") == label), None)
    note = mine.get("note") if mine is not None else None
    if not isinstance(note, str) or not note:
        return reason
    if active.get("label") != label:
        return note
    word, to = body.get("advice"), body.get("to")
    if word == "switch" and isinstance(to, dict) and isinstance(to.get("label"), str):
        return note + "; advice: switch to %s" % printable(to["label"][:80])
    if word == "none":
        return note + "; advice: none (%s)" % nobody_words(body)
    return note


def report(result: "Dict[str, Any]", opts: "Mapping[str, Any]") -> "Tuple[int, bytes, bytes]":
    code = EXIT_OF[result["decision"]]
    if code == 2:
        return 2, b"", ("svc-monitor guard: %s\n" % printable(result["reason"])).encode("utf-8", "replace")
    note = ""
    if code == EX_UNAVAILABLE and opts["fail_open"]:
        code, note = 0, "; going ahead (--fail-open)"
    err = "svc-monitor guard: %s: %s%s\n" % (result["decision"], printable(result["reason"]), note)
    out = b""
    if opts["json"]:
        import json
        out = (json.dumps(result, ensure_ascii=True, separators=(", ", ": ")) + "\n").encode("ascii")
    return code, out, err.encode("utf-8", "replace")


def _write(fd: int, data: bytes) -> None:
    while data:
        try:
            data = data[os.write(fd, data):]
        except InterruptedError:
            continue
        except OSError:
            return


def waiting_line(result: "Mapping[str, Any]", opts: "Mapping[str, Any]") -> bytes:
    """`--wait`'s first line, written as soon as it starts to wait: what holds and until when."""
    return ("svc-monitor guard: %s, waiting up to %s for go: %s\n"
            % (result["decision"], line.duration(opts["wait"] * 1000), printable(result["reason"]))
            ).encode("utf-8", "replace")


def main(argv: "Optional[Sequence[str]]" = None) -> int:
    started = time.monotonic() - process_age_s()
    try:
        code, out, err = run(sys.argv[1:] if argv is None else argv, os.environ, started,
                             say=lambda result, opts: _write(2, waiting_line(result, opts)))
    except KeyboardInterrupt:
        return 130
    _write(1, out)
    _write(2, err)
    return code
