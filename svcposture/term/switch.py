"""svc-monitor switch: make another account the active one (docs/steering.md).

    svc-monitor switch --to acct2
    svc-monitor switch --best [--provider codex]

Rewrites only the export line of the accounts env file (svcposture.exportline)
as one transaction with its `account.switched` event (svcposture.switching).
`--best` judges the accounts from the local monitor's posture (a cached
read; no provider call). The monitor's automatic switch runs this command in
a child with `--reason auto`, handing it the posture it judged on stdin.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .._reserve import ReserveError, reserve_pct
from .._text import email_address, is_int, loads_bounded, printable
from ..steering.advice import advise, candidates_of
from ..steering.headroom import choose, find_account, of_provider, resets_ms
from ..envfile.exportline import SwitchError
from ..settings import MONITOR_START_HINT, MONITOR_URL_RULE
from ..vendors import DEFAULT_PROVIDER, provider_names, registered, with_provider
from ..steering.switching import AVOID_WITHOUT_RESET_MS, auto_gap_ms
from ..vendors import is_account_label

EX_UNAVAILABLE = 69
# --best judges on the posture, and --to checks it against the file's text (and takes the email
# from it): both wait this long for a monitor that answers from its cache in milliseconds.
POSTURE_TIMEOUT_S = 2.0
MAX_POSTURE = 1024 * 1024


def export_lines() -> str:
    """Each registered vendor's export line as a switch writes it, one per line, for the help."""
    return "".join("  %-60s --provider %s\n" % (vendor.lines.export_line("<NAME>"), vendor.name)
                   for vendor in registered())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="svc-monitor switch",
        usage="svc-monitor switch (--to LABEL | --best) [--provider P] [--dry-run] [--json] [--url URL]",
        description=(
            "Make another account the active one by rewriting only the export line of the accounts env file,\n"
            "that of the vendor --provider names:\n\n" + export_lines() + "\n"
            "Every other byte of the file is kept; no token is read into the output.\n"
            "The write is atomic (a 0600 temporary file in the same directory, fsync, rename), follows no\n"
            "symlink, keeps the file's mode and is refused when the file changed meanwhile. One\n"
            "account.switched event is appended per switch; a running monitor shows the new active account\n"
            "within 2 s. New agent sessions pick it up; running ones keep their token.\n\n"
            "A switch whose account.switched event cannot be appended is still reported (exit 0), with a\n"
            "warning that the event is pending; the next switch or the monitor's start records it.\n\n"
            "exit: 0 switched (or already active), 1 refused (unknown or unusable account, a line the shell\n"
            "would take otherwise, a file that is not valid shell or would pass 1 MiB, a monitor posture that\n"
            "names another active account, no account with headroom, the file changed or is a symlink, the\n"
            "switch lock held for 10 s), 2 bad usage, 69 --best without a monitor posture."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--to", metavar="LABEL", help="the account to make active (acct2, codex-work, ...)")
    which.add_argument("--best", action="store_true",
                       help="the account with the most headroom under the reserve on both windows, "
                            "from the local monitor's posture; none: exit 1, file untouched")
    which.add_argument("--reconcile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--provider", choices=provider_names(), default=DEFAULT_PROVIDER,
                        help="whose accounts (default %s)" % DEFAULT_PROVIDER)
    parser.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")
    parser.add_argument("--json", action="store_true",
                        help="print {switched, provider, from, to, reason, dryRun, file, eventId} "
                             "(and eventPending, warning when the event is pending)")
    parser.add_argument("--url", help="monitor base URL (default: %s)" % MONITOR_URL_RULE)
    # The monitor's automatic switch: reason auto, the posture it judged on stdin.
    parser.add_argument("--reason", choices=("manual", "best", "auto"), help=argparse.SUPPRESS)
    parser.add_argument("--posture-stdin", action="store_true", help=argparse.SUPPRESS)
    return parser


def read_posture(ns: argparse.Namespace, timeout_s: float, env_path: str) -> Any:
    """The posture body: from stdin (the monitor's own, with the advice it judged
    under `advice`), else the local monitor, else None. SwitchError when the monitor
    watches another accounts file than `env_path`, the one the switch edits."""
    if ns.posture_stdin:
        try:
            return loads_bounded(sys.stdin.buffer.read(MAX_POSTURE + 1), MAX_POSTURE)
        except ValueError:
            return None
    from .._http import get_json, parse_url
    from .statusline import monitor_url
    ns.url = ns.url or monitor_url(os.environ)
    target = parse_url(ns.url)
    if target is None:
        return None
    deadline = time.monotonic() + timeout_s
    _same_file(ns.url, get_json(target, "/healthz", deadline), env_path)
    return get_json(target, with_provider("/api/accounts", ns.provider), deadline)


def _same_file(url: str, health: Any, env_path: str) -> None:
    """SwitchError when the monitor's /healthz names another accounts file than the one edited: its
    posture (which account is active, the emails, the headroom) is another file's."""
    from ..envfile.fileid import file_id
    theirs = health.get("accountsFile") if isinstance(health, dict) else None
    if not isinstance(theirs, str) or theirs == file_id(env_path):
        return  # the same file, or a monitor that does not say (it is judged by its posture alone)
    raise SwitchError("the monitor at %s watches another accounts file than %s, the one this switch edits: its "
                      "accounts are not this file's; run the switch on the monitor's own node, or give the --url of "
                      "the monitor that watches this file" % (printable(url)[:200], env_path), 2)


def _usable_posture(body: Any) -> bool:
    return isinstance(body, dict) and body.get("available") is True and "error" not in body \
        and isinstance(body.get("accounts"), list)


def pick_best(ns: argparse.Namespace, body: Any, reserve: int, node: str, limits: Dict[str, Any],
              advice: Any = None) -> str:
    """The label `--best` switches to; SwitchError when the posture cannot tell or none has headroom.

    The advice (svcposture.advice: the monitor's own from /api/advice, else computed
    here from the posture) decides: its first candidate, the account
    siblingWithHeadroom names; with none, the active account while it is below
    the limit. The automatic switch acts only on the advice `switch`, among the
    candidates its hysteresis allows, spread over the fleet."""
    if not _usable_posture(body):
        where = "the monitor at %s" % printable(ns.url)[:200] if ns.url else "the local monitor"
        if body is None:
            raise SwitchError("%s did not answer; --best needs its posture (or use --to LABEL): %s"
                              % (where, MONITOR_START_HINT), EX_UNAVAILABLE)
        raise SwitchError("%s gave no usable posture; --best needs it (use --to LABEL)" % where,
                          EX_UNAVAILABLE)
    auto = ns.reason == "auto"
    if not _advice_of(advice, ns.provider):
        ceiling = _auto_at() if auto else None
        advice = advise(body, None, provider=ns.provider, reserve=reserve, wait_s=_wait_s(), now_ms=_now_ms(),
                        ceiling=ceiling)
    # Only accounts of the posture judged: an advice naming anything else is not followed.
    known = {a.get("label") for a in body["accounts"] if isinstance(a, dict)}
    ranked = [r for r in candidates_of(advice) if of_provider(r["label"], ns.provider) and r["label"] in known]
    if auto:
        if advice["advice"] != "switch":
            raise SwitchError("the advice is %s: %s" % (advice["advice"], printable(advice.get("reason"))[:300]))
        avoid = limits.get("avoid") or {}
        now = _now_ms()
        ranked = [r for r in ranked if not (isinstance(avoid.get(r["label"]), int) and avoid[r["label"]] > now)]
        near = [(r["label"], float(r["headroomPct"])) for r in ranked if r["reachesReset"] == ranked[0]["reachesReset"]]
        label = choose(near, host=node, roster=_roster()) if ranked else None
        if label is None:
            raise SwitchError("no other account has headroom that the automatic switch may go back to yet")
        return label
    if ranked:
        return ranked[0]["label"]
    active = advice.get("active")
    if advice["advice"] in ("stay", "wait") and isinstance(active, dict) and isinstance(active.get("label"), str):
        return active["label"]
    raise SwitchError("no account has headroom under the %d%% reserve on every window; file untouched (%s)"
                      % (reserve, printable(advice.get("reason"))[:300]))


def _advice_of(advice: Any, provider: str) -> bool:
    """Whether `advice` is an advice body for `provider` (the monitor's, or handed in by it)."""
    return (isinstance(advice, dict) and advice.get("provider") == provider
            and advice.get("advice") in ("stay", "wait", "switch", "none") and isinstance(advice.get("ranked"), list)
            and all(isinstance(r, dict) and isinstance(r.get("label"), str) for r in advice["ranked"])
            and all(isinstance(r.get("headroomPct"), (int, float)) and isinstance(r.get("reachesReset"), bool)
                    for r in candidates_of(advice)))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _wait_s() -> int:
    from ..settings import Settings
    return Settings.from_environ(os.environ, strict=False).advice_wait_s


def _auto_at() -> Optional[float]:
    from ..settings import Settings
    return Settings.from_environ(os.environ, strict=False).auto_switch_at


def read_advice(ns: argparse.Namespace, timeout_s: float) -> Any:
    """The monitor's /api/advice for the vendor (None without one)."""
    from .._http import get_json, parse_url
    from .statusline import monitor_url
    target = parse_url(ns.url or monitor_url(os.environ))
    if target is None:
        return None
    return get_json(target, with_provider("/api/advice", ns.provider), time.monotonic() + timeout_s)


def _roster() -> Optional[List[str]]:
    """The cluster roster, for the fleet spread; None when there is none to read."""
    from ..config import ConfigError, roster
    from ..paths import Paths
    try:
        return roster(Paths(environ=os.environ)) or None
    except (ConfigError, OSError):
        return None


def auto_check(to_label: str, judged: Optional[str]) -> Any:
    """The automatic switch's hysteresis, checked under the switch lock; `judged`
    is the active account of the posture the choice was made on."""
    def check(vendor: Dict[str, Any], current: Optional[str]) -> None:
        if current != judged:
            raise SwitchError("the posture judged (active %s) predates the file (active %s); not switching"
                              % (judged, current))
        now = int(time.time() * 1000)
        last = vendor.get("lastAutoMs")
        gap = auto_gap_ms()
        if isinstance(last, int) and now - last < gap:
            raise SwitchError("an automatic switch was made %d s ago; at most one per %d s per host"
                              % ((now - last) // 1000, gap // 1000))
        until = vendor.get("avoid", {}).get(to_label)
        if isinstance(until, int) and until > now:
            raise SwitchError("%s was left by an automatic switch; not before its window resets" % to_label)
    return check


def _avoid_until(body: Any) -> Optional[int]:
    """When the account being left may be gone back to: its binding window's reset."""
    active = find_account(body, None) if isinstance(body, dict) else None
    if not active:
        return None
    claim = active.get("bindingWindow")
    field = {"five_hour": "fiveHour", "seven_day": "sevenDay"}.get(claim if isinstance(claim, str) else "")
    until = resets_ms(active.get(field)) if field else None
    return until if until is not None else int(time.time() * 1000) + AVOID_WITHOUT_RESET_MS


def _active_label(body: Any) -> Optional[str]:
    active = find_account(body, None) if isinstance(body, dict) else None
    return active.get("label") if active else None


def _email_of(body: Any, label: str) -> Optional[str]:
    """The account's email from the posture, when it is one: the body came from whatever answers at --url."""
    view = find_account(body, label) if isinstance(body, dict) else None
    return email_address(view.get("email")) if view else None


def _shell_active(body: Any) -> Optional[Tuple[Optional[str], int]]:
    """(active label, probedAt ms) of a usable posture: what the shell made active when the monitor
    last sourced the env file. None when the posture cannot tell."""
    if not _usable_posture(body) or not is_int(body.get("probedAt")):
        return None
    label = _active_label(body)
    return (label if is_account_label(label) else None), body["probedAt"]


def run(ns: argparse.Namespace) -> Dict[str, Any]:
    from ..config import node_name
    from ..paths import Paths
    from ..steering.switching import auto_limits, perform, reconcile

    paths = Paths(environ=os.environ)
    node = node_name(paths)
    if ns.reconcile:
        return {"reconciled": reconcile(paths, node)}
    try:
        reserve = reserve_pct(str(paths.home))
    except ReserveError as exc:
        raise SwitchError(str(exc), 2) from None
    url_given = bool(ns.url)
    body = read_posture(ns, POSTURE_TIMEOUT_S, str(paths.accounts_env))
    reason = ns.reason or ("best" if ns.best else "manual")
    ns.reason = reason
    advice = None
    if ns.best and ns.posture_stdin and isinstance(body, dict):
        advice = body.pop("advice", None)
    elif ns.best:
        advice = read_advice(ns, POSTURE_TIMEOUT_S)
        # The monitor's advice only for the posture just read (a probe may land in between).
        if not isinstance(advice, dict) or not isinstance(body, dict) or advice.get("probedAt") != body.get("probedAt"):
            advice = None
    to_label = pick_best(ns, body, reserve, node, auto_limits(paths, ns.provider), advice) if ns.best else ns.to
    auto = reason == "auto"
    result = perform(paths, provider=ns.provider, to_label=to_label, reason=reason, node=node,
                     email=_email_of(body, to_label), avoid_until_ms=_avoid_until(body) if auto else None,
                     dry_run=ns.dry_run, check=auto_check(to_label, _active_label(body)) if auto else None,
                     shell_active=_shell_active(body))
    if body is None and url_given and not ns.posture_stdin:
        # The file is edited without a monitor; the one named was looked for, and is not there.
        result["warning"] = "; ".join(filter(None, (result.get("warning"), "the monitor at %s did not answer, so "
                                                    "the file was not checked against its posture; %s"
                                                    % (printable(ns.url)[:200], MONITOR_START_HINT))))
    return result


def main(argv: Optional[Sequence[str]] = None) -> int:
    ns = build_parser().parse_args(argv)
    try:
        result = run(ns)
    except SwitchError as exc:
        if ns.json:
            print(json.dumps({"switched": False, "provider": ns.provider, "error": printable(exc)}))
        print("svc-monitor switch: %s" % printable(exc), file=sys.stderr)
        return exc.code
    if result.get("warning"):
        print("svc-monitor switch: warning: %s" % printable(result["warning"]), file=sys.stderr)
    if ns.json:
        print(json.dumps(result, ensure_ascii=False))
    elif "reconciled" in result:
        print("svc-monitor switch: %d interrupted switch(es) recorded" % result["reconciled"])
    elif result.get("note"):
        print("svc-monitor switch: %s" % result["note"])
    else:
        verb = "would switch" if result["dryRun"] else "switched"
        print("svc-monitor switch: %s %s -> %s in %s" % (verb, result["from"] or "(none)", result["to"],
                                                         printable(result["file"])))
    return 0
