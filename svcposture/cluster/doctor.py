"""Every check of a node's cluster setup: `svc-cluster doctor`, and the PER-NODE checklist that join prints.

The doctor's checks (docs/liveness.md) each give PASS, INFO, WARN or FAIL with a
detail; `run_doctor` runs them all. The checklist reports each PER-NODE item of
the classification as present or missing with what to do; it is never copied
from another node.
"""
from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import config
from .._dirs import unsafe_dir_reason
from .._files import CorruptFileError
from .._spawn import PACKAGE, child_env, module_command
from .._text import printable
from .._time import now_ms
from ..config import TEAM_KEY, ConfigError, flatten, get_dotted, layer1_get, load_layer
from ..events import EventLog, EventLogError
from ..posture.latch import read_latch
from ..paths import Paths
from ..vendors import registered
from ..probe.text import accounts_notes, check_summary, line_problem_notes, valid_line_problems
from ..remote.address import is_loopback
from ..remote.certificate import CertificateError, key_exposure, server_context, utc_text
from ..remote.token import token_file_problem
from ..settings import Settings
from . import tracker
from ._common import print_json
from .accountcheck import check_account_health
from .budget import RateBudget
from .budgetcheck import check_tracker_budget
from .liveness import READ_SOURCE_ENV, peer_states

PASS, INFO, WARN, FAIL = "PASS", "INFO", "WARN", "FAIL"
PROBE_CHECK_TIMEOUT_S = 30.0
# A scrape certificate this close to its notAfter is a WARN: time to renew it before scrapes fail.
CERT_RENEW_WARN_S = 14 * 86400


# ---------------------------------------------------------------- the PER-NODE checklist (join)

_CHECKLIST: List[Tuple[str, str, Callable[[Paths], Tuple[bool, str]], str]] = []


def _checklist_item(name: str, location: str, todo: str) -> Callable[[Callable[[Paths], Tuple[bool, str]]], Any]:
    def register(func: Callable[[Paths], Tuple[bool, str]]) -> Any:
        _CHECKLIST.append((name, location, func, todo))
        return func
    return register


def _config_files(paths: Paths) -> List[Path]:
    try:
        return sorted(p for p in paths.config_dir.glob("config-*.json") if p.is_file())
    except OSError:
        return []


@_checklist_item("Model-provider account login", "OS keychain or ~/.claude/.credentials.json",
                 "log in interactively with the provider's CLI on this host; each node uses its own account")
def _has_login(paths: Paths) -> Tuple[bool, str]:
    return paths.login_credentials.is_file(), str(paths.login_credentials)


@_checklist_item("repoRoot", "~/svc/execution-core/registry.json key repoRoot",
                 "run the execution-core register command in this host's checkout")
def _has_repo_root(paths: Paths) -> Tuple[bool, str]:
    root = load_layer(paths.registry_json).get("repoRoot")
    return isinstance(root, str) and bool(root.strip()), str(paths.registry_json)


@_checklist_item("Telemetry endpoints", "~/.config/svc/config.json, OTel keys",
                 "set this host's private-network OTel endpoints in ~/.config/svc/config.json")
def _has_telemetry(paths: Paths) -> Tuple[bool, str]:
    keys = [k for k, v in flatten(load_layer(paths.config_json)).items()
            if v not in (None, "") and ("otel" in k.lower() or "telemetry" in k.lower())]
    return bool(keys), ", ".join(keys[:4]) or str(paths.config_json)


@_checklist_item("execution-core.env", "~/svc/execution-core/execution-core.env",
                 "write this host's proxy and tuning overrides (or an empty file if none)")
def _has_execution_core_env(paths: Paths) -> Tuple[bool, str]:
    return paths.execution_core_env.is_file(), str(paths.execution_core_env)


@_checklist_item("Worktree trust", "~/.claude.json per worktree path",
                 "open each worktree with the provider CLI on this host and accept the trust prompt")
def _has_trusted_worktree(paths: Paths) -> Tuple[bool, str]:
    projects = load_layer(paths.login_profile).get("projects")
    trusted = [p for p, v in projects.items() if isinstance(v, dict) and v.get("hasTrustDialogAccepted")] \
        if isinstance(projects, dict) else []
    return bool(trusted), "%d trusted path(s) in %s" % (len(trusted), paths.login_profile)


@_checklist_item("Tracker personal token", "~/.config/svc/config-<key>.json key tracker.apiKey",
                 "put your own tracker API key into ~/.config/svc/config-<teamKey>.json (tracker.apiKey)")
def _has_personal_token(paths: Paths) -> Tuple[bool, str]:
    team = layer1_get(paths, TEAM_KEY)
    files = [paths.personal_config(team)] if isinstance(team, str) and team else _config_files(paths)
    for path in files:
        value = get_dotted(load_layer(path), "tracker.apiKey")
        if isinstance(value, str) and value.strip():
            return True, str(path)
    return False, ", ".join(str(p) for p in files) or str(paths.config_dir / "config-<key>.json")


@_checklist_item("Webhook secrets", "~/.config/svc/config-<key>.json, webhook keys",
                 "generate fresh webhook secrets on this host (or copy them over a secure channel)")
def _has_webhook_secrets(paths: Paths) -> Tuple[bool, str]:
    for path in _config_files(paths):
        keys = [k for k, v in flatten(load_layer(path)).items() if "webhook" in k.lower() and v not in (None, "")]
        if keys:
            return True, str(path)
    return False, str(paths.config_dir / "config-<key>.json")


@_checklist_item("SQLite databases", "~/svc/*.db (4 files)",
                 "nothing to copy: the services create their host-local databases on first run")
def _has_sqlite_databases(paths: Paths) -> Tuple[bool, str]:
    try:
        found = sorted(p.name for p in paths.svc_dir.glob("*.db"))
    except OSError:
        found = []
    return bool(found), "%d of 4 file(s) in %s" % (len(found), paths.svc_dir)


@_checklist_item("Event log", "~/svc/events/YYYY-MM.jsonl",
                 "nothing to copy: the monitor starts this node's own log; never share log files")
def _has_event_log(paths: Paths) -> Tuple[bool, str]:
    try:
        found = sorted(p.name for p in paths.events_dir.glob("*.jsonl"))
    except OSError:
        found = []
    return bool(found), "%d file(s) in %s" % (len(found), paths.events_dir)


def per_node_checklist(paths: Paths) -> List[Dict[str, Any]]:
    out = []
    for name, location, func, todo in _CHECKLIST:
        try:
            present, detail = func(paths)
        except (ConfigError, OSError, ValueError) as exc:
            present, detail = False, "unreadable: %s" % printable(exc)
        out.append({"item": name, "status": "present" if present else "missing", "location": location,
                    "detail": detail, "todo": None if present else todo})
    return out


# ---------------------------------------------------------------- doctor

def _check_result(name: str, status: str, detail: str) -> Dict[str, str]:
    return {"name": name, "status": status, "detail": detail}


def _check_anchor(paths: Paths, settings: Settings, node: Optional[str],
                  hosts: Optional[List[str]], seen: Optional[List[RateBudget]] = None) -> Dict[str, str]:
    """The anchor check; the tracker's stated rate-limit budget, when it answered, goes to `seen`."""
    name = "liveness-anchor"
    source = settings.liveness_read_source
    if source != "tracker":
        return _check_result(name, INFO, "liveness is read from %s (%s=%s); the anchor is not used"
                             % (source.capitalize(), READ_SOURCE_ENV, source))
    try:
        anchor = config.liveness_anchor(paths)
    except config.ConfigError as exc:
        return _check_result(name, FAIL, "cannot read the anchor: %s" % exc)
    if anchor is None:
        return _check_result(name, FAIL, "unset: run svc-cluster set-anchor <TICKET> on every host, "
                                         "then svc-stack restart")
    try:
        client = tracker.TrackerClient.for_paths(paths, url=settings.tracker_url)
        try:
            issue = client.fetch_issue(anchor)
        finally:
            if seen is not None:
                seen.append(client.budget)
    except config.ConfigError as exc:
        return _check_result(name, WARN, "%s: cannot read the tracker token: %s" % (anchor, exc))
    except tracker.TrackerTokenMissingError:
        return _check_result(name, WARN, "%s: cannot verify, no tracker token on this host" % anchor)
    except tracker.TrackerNotFoundError:
        return _check_result(name, FAIL, "%s does not exist (or this token cannot see it): pick a live issue "
                                         "and move the anchor" % anchor)
    except tracker.TrackerAuthError as exc:
        return _check_result(name, WARN, "%s: cannot verify: %s" % (anchor, exc))
    except tracker.TrackerError as exc:
        return _check_result(name, WARN, "%s: tracker unreachable: %s" % (anchor, exc))
    if issue.trashed:
        return _check_result(name, FAIL, "%s is in the trash: restore it, or move the anchor" % anchor)
    if issue.archived_at:
        return _check_result(name, FAIL, "%s is archived (%s): unarchive it, or move the anchor"
                             % (anchor, issue.archived_at))
    if issue.closed:
        return _check_result(name, WARN, "%s is closed (%s): the anchor must stay open; reopen it"
                             % (anchor, issue.state_type))
    if hosts is not None and len(set(hosts)) > 1 and node:
        mine = peer_states([node], issue.heartbeats, now_ms(), settings.liveness_interval_ms)[0]
        if mine["state"] == "missing":
            return _check_result(name, WARN, "%s is open but carries no heartbeat from %s: if the anchor was "
                                             "just moved, run svc-stack restart on this host" % (anchor, node))
        if mine["state"] == "stale":
            return _check_result(name, WARN, "%s is open but the heartbeat from %s is stale (%s s old): is the "
                                             "monitor running? (svc-stack status)" % (anchor, node, mine["ageS"]))
    return _check_result(name, PASS, "%s is open (%s); %d heartbeat(s) on it" % (
        anchor, issue.state_type or "state unknown", len(issue.heartbeats)))


def _check_roster(paths: Paths) -> Tuple[Dict[str, str], Optional[List[str]]]:
    name = "roster"
    try:
        path = config.cluster_json_path(paths)
        hosts = config.roster(paths)
    except config.ConfigError as exc:
        return _check_result(name, FAIL, "unreadable: %s" % exc), None
    if not path.exists():
        return _check_result(name, WARN, "%s not found: clone the cluster repo and run svc-cluster sync" % path), []
    duplicates = sorted({h for h in hosts if hosts.count(h) > 1})
    if duplicates:
        return _check_result(name, FAIL, "duplicate host names in %s: %s" % (path, ", ".join(duplicates))), hosts
    if not hosts:
        return _check_result(name, WARN, "%s has an empty roster" % path), hosts
    return _check_result(name, PASS, "%d host(s): %s" % (len(hosts), ", ".join(hosts))), hosts


def _check_host_name(paths: Paths, hosts: Optional[List[str]]) -> Tuple[Dict[str, str], Optional[str]]:
    """The host name against the roster; an unknown key in node.json (a misspelt
    host name key, say) turns a pass into a warning naming it."""
    result, host = _host_name_result(paths, hosts)
    try:
        unknown = config.unknown_node_keys(paths)
    except config.ConfigError:
        unknown = []  # reported by the host name's own read
    if unknown:
        status = WARN if result["status"] == PASS else result["status"]
        result = _check_result(result["name"], status, "; ".join([result["detail"]] + unknown))
    return result, host


def _host_name_result(paths: Paths, hosts: Optional[List[str]]) -> Tuple[Dict[str, str], Optional[str]]:
    name = "host-name"
    try:
        host = config.host_name(paths)
    except config.ConfigError as exc:
        return _check_result(name, FAIL, "cannot read: %s" % exc), None
    if host is None:
        return _check_result(name, FAIL, "%s is unset in node.json: this host owns no tickets (svc-cluster join "
                                         "--host-name NAME)" % config.HOST_NAME_KEY), None
    if hosts is None:
        return _check_result(name, FAIL, "%s: cannot check against an unreadable roster" % host), host
    if host not in hosts:
        return _check_result(name, FAIL, "%s is not in the roster, so it owns zero tickets: svc-cluster roster "
                                         "add %s --push" % (host, host)), host
    return _check_result(name, PASS, "%s is in the roster" % host), host


def _check_legacy_roster(paths: Paths) -> Dict[str, str]:
    name = "legacy-roster"
    try:
        root = config.layer1_root(paths)
    except config.ConfigError as exc:
        return _check_result(name, INFO, "project repo unknown: %s" % exc)
    if root is None:
        return _check_result(name, INFO, "project repo unknown (set SVC_REPO_ROOT or register it); nothing to check")
    legacy = root / ".svc" / "hosts.json"
    if legacy.exists():
        return _check_result(name, WARN, "%s is retired and never read; the roster is cluster.json in the cluster "
                                         "repo. Delete it to avoid confusion" % legacy)
    return _check_result(name, PASS, "no legacy .svc/hosts.json in %s" % root)


def _regular_file(name: str, path: Path, absent: str, follow: bool
                  ) -> Tuple[Optional[os.stat_result], Optional[Dict[str, str]]]:
    """(stat, None) for a regular file at `path`, else (None, the check's result).

    A missing file is INFO with `absent` as the detail: both files are optional.
    """
    try:
        info = os.stat(str(path)) if follow else os.lstat(str(path))
    except FileNotFoundError:
        return None, _check_result(name, INFO, "%s %s" % (path, absent))
    except OSError as exc:
        return None, _check_result(name, FAIL, "%s: cannot stat: %s" % (path, exc.strerror))
    if not stat.S_ISREG(info.st_mode):
        return None, _check_result(name, FAIL, "%s is not a regular file" % path)
    return info, None


def _check_cloud_env(paths: Paths) -> Dict[str, str]:
    name = "cloud-env"
    path = paths.cluster_env
    # lstat: the projection replaces this file atomically, so a link here was planted.
    info, result = _regular_file(name, path, "not present (no cloud token projected; cloud is opt-in)", follow=False)
    if info is None:
        return result
    mode = stat.S_IMODE(info.st_mode)
    if mode != 0o600:
        return _check_result(name, FAIL, "%s has mode %04o, must be 0600: chmod 600 %s" % (path, mode, path))
    if info.st_uid != os.getuid():
        return _check_result(name, FAIL, "%s is not owned by this user" % path)
    return _check_result(name, PASS, "%s is mode 0600" % path)


def _check_accounts_env(paths: Paths) -> Dict[str, str]:
    name = "accounts-env"
    path = paths.accounts_env
    info, result = _regular_file(name, path, "not present: the posture surface is disabled on this host",
                                 follow=True)
    if info is None:
        return result
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        return _check_result(name, FAIL, "%s is writable by group or others (mode %04o) and is sourced as shell: "
                                         "chmod 600 %s" % (path, mode, path))
    if not os.access(str(path), os.R_OK):
        return _check_result(name, FAIL, "%s is not readable" % path)
    env = child_env(paths.environ)
    env["HOME"] = str(paths.home)
    env["SVC_ACCOUNTS_ENV"] = str(path)
    try:
        proc = subprocess.run(module_command("probe", "check", "--json"), env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=PROBE_CHECK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return _check_result(name, WARN, "%s: the entry check did not finish within %g s"
                             % (path, PROBE_CHECK_TIMEOUT_S))
    except OSError as exc:
        return _check_result(name, WARN, "%s: cannot run the entry check: %s" % (path, exc.strerror))
    try:
        report = json.loads(proc.stdout.decode("utf-8", "replace"))
    except ValueError:
        report = None
    if not isinstance(report, dict):
        # An argparse usage error (exit 2) means this build's probe has no `check`.
        return _check_result(name, WARN, "%s: permissions ok; entry check unavailable (%s.probe check exited %d "
                                         "without a JSON report)" % (path, PACKAGE, proc.returncode))
    return _accounts_check_from_report(path, report, proc.returncode, mode)


def _accounts_check_from_report(path: Path, report: Dict[str, Any], returncode: int,
                                mode: int = 0o600) -> Dict[str, str]:
    """The probe's `check` report ({usable, unusable, active, duplicateActive, lineProblems} or {error})
    as a check; a line the shell takes wrongly, or a file of tokens others may read, is a WARN at least."""
    problems = valid_line_problems(report)
    result = _accounts_verdict(path, report, returncode, {p["label"] for p in problems})
    named = bool(report.get("error")) or result["status"] == INFO  # these verdicts carry every note already
    extra = "".join("; " + note for note in line_problem_notes(report, path)) if not named else ""
    if mode & 0o044:
        extra += "; %s is readable by group or others (mode %04o) and holds tokens: chmod 600 %s" % (path, mode, path)
    if not problems and not mode & 0o044:
        return result
    status = result["status"] if result["status"] in (WARN, FAIL) else WARN
    return _check_result(result["name"], status, result["detail"] + extra)


def _accounts_verdict(path: Path, report: Dict[str, Any], returncode: int, explained: Any) -> Dict[str, str]:
    name = "accounts-env"
    error = report.get("error")
    notes = "".join("; " + note for note in accounts_notes(report, path))
    if error:
        kind = error.get("kind") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        detail = "%s: %s (%s)" % (path, str(message or "check failed")[:200], kind or "error")
        return _check_result(name, FAIL if kind == "config" else WARN, detail + notes)
    details, warnings, usable, inactive = [], [], False, []
    for vendor in registered():
        block = report.get(vendor.name)
        if isinstance(block, dict) and explained:
            # A line the shell takes wrongly says itself why its account is unusable.
            block = dict(block, unusable=[u for u in block.get("unusable") or [] if u not in explained])
        detail, any_usable, warning = check_summary(vendor, block)
        if detail:
            details.append(detail)
        if warning:
            warnings.append(warning)
        usable = usable or any_usable
        if any_usable and not isinstance(block.get("active"), str):
            inactive.append(vendor)
    detail = "%s: %s" % (path, "; ".join(details) or "no account line")
    if returncode != 0:
        return _check_result(name, WARN, detail + "; the check exited %d" % returncode)
    if warnings:
        return _check_result(name, WARN, detail + "; " + "; ".join(warnings))
    if not usable:
        return _check_result(name, INFO, detail + "; the posture surface is disabled" + notes)
    if inactive:
        return _check_result(name, WARN, detail + "; " + "; ".join(
            "no %s line equals %s, so that vendor's node status is unknown" % (v.display_name, v.lines.active_var)
            for v in inactive))
    return _check_result(name, PASS, detail)


def _check_event_log(paths: Paths) -> Dict[str, str]:
    log = EventLog.for_paths(paths)
    try:
        log.check_writable()
    except EventLogError as exc:
        return _check_result("event-log", FAIL, str(exc))
    return _check_result("event-log", PASS, "%s is writable" % paths.events_dir)


def _node_dirs(paths: Paths) -> List[Path]:
    dirs = [paths.config_dir, paths.accounts_env.parent, paths.svc_dir, paths.events_dir, paths.run_dir,
            paths.logs_dir, paths.history_dir]
    unique: List[Path] = []
    for directory in dirs:
        if directory not in unique:
            unique.append(directory)
    return unique


def _check_directories(paths: Paths) -> Dict[str, str]:
    """Every directory of the node that exists: owned by this user (or root), not
    writable by group or others, nor any directory above it. Nothing is changed."""
    name = "directories"
    present = [d for d in _node_dirs(paths) if os.path.lexists(str(d))]
    problems = [reason for reason in (unsafe_dir_reason(d) for d in present) if reason]
    if problems:
        # One reason per directory, duplicates (a shared unsafe ancestor) once.
        unique = list(dict.fromkeys(problems))
        return _check_result(name, FAIL, "; ".join(unique))
    if not present:
        return _check_result(name, INFO, "none of the node's directories exist yet")
    return _check_result(name, PASS, "%d director%s private: %s" % (
        len(present), "y" if len(present) == 1 else "ies", ", ".join(str(d) for d in present)))


def _check_latch(paths: Paths) -> Dict[str, str]:
    try:
        data = read_latch(paths.latch)
    except (CorruptFileError, ValueError) as exc:
        return _check_result("latch", FAIL, "%s; the monitor will move it aside and rebuild it from the event "
                                            "log" % exc)
    except OSError as exc:
        return _check_result("latch", FAIL, "%s: cannot read: %s" % (paths.latch, exc.strerror))
    accounts = data.get("accounts", {})
    latched = sorted(k for k, v in accounts.items() if v.get("latched"))
    if not paths.latch.exists():
        return _check_result("latch", PASS, "%s not written yet (no edge seen)" % paths.latch)
    return _check_result("latch", PASS, "%d account(s), latched: %s" % (len(accounts), ", ".join(latched) or "none"))


def _scrape_remote(settings: Settings) -> bool:
    return settings.metrics_bind is not None and not is_loopback(settings.metrics_bind[0])


def _check_metrics_token(paths: Paths, settings: Settings) -> Dict[str, str]:
    """The bearer token file, by the monitor's own rules (remote/token.py); never shown."""
    name = "metrics-token"
    path = paths.metrics_token
    if not os.path.lexists(str(path)):
        if _scrape_remote(settings):
            return _check_result(name, FAIL, "SVC_METRICS_BIND is off the loopback and needs %s, which does not "
                                             "exist: svc-monitor init --metrics-token, or copy the fleet's token "
                                             "file there (mode 0600)" % path)
        return _check_result(name, INFO, "%s not present: needed only by a listener off the loopback "
                                         "(SVC_METRICS_BIND, --allow-remote)" % path)
    problem = token_file_problem(path)
    if problem is not None:
        return _check_result(name, FAIL, problem)
    return _check_result(name, PASS, "%s: one token line, owned by this user, no access for group or others" % path)


def _check_scrape_tls(settings: Settings, now: float) -> Dict[str, str]:
    """The scrape listener's TLS: its certificate and key readable, matching and valid, or plain HTTP said aloud."""
    name = "scrape-tls"
    if settings.metrics_bind is None:
        return _check_result(name, INFO, "no scrape listener (SVC_METRICS_BIND unset)")
    if not settings.metrics_tls_cert:
        if not _scrape_remote(settings):
            return _check_result(name, INFO, "plain HTTP on the loopback")
        if settings.metrics_plain_http:
            return _check_result(name, WARN, "plain HTTP off the loopback (SVC_METRICS_PLAIN_HTTP=1): the bearer "
                                             "token and the metrics cross the network unencrypted; set "
                                             "SVC_METRICS_TLS_CERT and SVC_METRICS_TLS_KEY")
        return _check_result(name, FAIL, "off the loopback without TLS, so the monitor refuses to start: set "
                                         "SVC_METRICS_TLS_CERT and SVC_METRICS_TLS_KEY (or SVC_METRICS_PLAIN_HTTP=1)")
    cert, key = settings.metrics_tls_cert, settings.metrics_tls_key
    try:
        _context, not_after = server_context(cert, key, now)
    except CertificateError as exc:
        return _check_result(name, FAIL, str(exc))
    notes = [note for note in (key_exposure(key),) if note]
    if not_after - now < CERT_RENEW_WARN_S:
        notes.insert(0, "the certificate %s expires on %s: renew it" % (cert, utc_text(not_after)))
    if notes:
        return _check_result(name, WARN, "; ".join(notes))
    return _check_result(name, PASS, "%s and %s match; valid until %s; TLS 1.2 or later"
                         % (cert, key, utc_text(not_after)))


def _alone(paths: Paths) -> bool:
    """Whether this host is in no cluster: no roster file and no liveness anchor (a node on its own)."""
    try:
        return not config.cluster_json_path(paths).exists() and config.liveness_anchor(paths) is None
    except (config.ConfigError, OSError):
        return False


def _not_in_cluster(paths: Paths) -> List[Dict[str, str]]:
    """The cluster checks of a host in no cluster: INFO, each saying so (nothing there is wrong)."""
    why = "not in a cluster (no roster at %s and no liveness anchor)" % config.cluster_json_path(paths)
    try:
        host = config.host_name(paths)
    except config.ConfigError as exc:
        return [_check_result("liveness-anchor", INFO, why),
                _check_result("host-name", FAIL, "cannot read: %s" % exc), _check_result("roster", INFO, why)]
    named = "%s; %s" % (host, why) if host else why
    try:
        unknown = config.unknown_node_keys(paths)
    except config.ConfigError:
        unknown = []
    # A misspelt key still deserves a word: the host name it meant is not read.
    host_check = _check_result("host-name", WARN if unknown else INFO, "; ".join([named] + unknown))
    return [_check_result("liveness-anchor", INFO, why), host_check, _check_result("roster", INFO, why)]


def run_doctor(paths: Paths, settings: Settings) -> Dict[str, Any]:
    seen: List[RateBudget] = []
    if _alone(paths):
        anchor_check, host_check, roster_check = _not_in_cluster(paths)
        budget_check = {"name": "tracker-budget", "status": INFO, "detail": "not in a cluster: no heartbeats"}
    else:
        roster_check, hosts = _check_roster(paths)
        host_check, node = _check_host_name(paths, hosts)
        anchor_check = _check_anchor(paths, settings, node, hosts, seen)
        budget_check = check_tracker_budget(settings, hosts, seen[0] if seen else None)
    checks = [
        anchor_check,
        host_check,
        roster_check,
        _check_legacy_roster(paths),
        _check_cloud_env(paths),
        _check_accounts_env(paths),
        _check_event_log(paths),
        _check_latch(paths),
        _check_directories(paths),
        _check_metrics_token(paths, settings),
        _check_scrape_tls(settings, now_ms() / 1000.0),
        budget_check,
        check_account_health(paths),
    ]
    return {"ok": not any(c["status"] == FAIL for c in checks), "checks": checks}


# ---------------------------------------------------------------- command

def cmd_doctor(ns: argparse.Namespace) -> int:
    report = run_doctor(Paths(environ=os.environ), Settings.from_environ(os.environ, strict=False))
    if ns.json:
        print_json(report, ensure_ascii=False)
    else:
        width = max(len(c["name"]) for c in report["checks"])
        for check in report["checks"]:
            print("%-4s  %-*s  %s" % (check["status"], width, check["name"], printable(check["detail"])))
        print("ok" if report["ok"] else "FAIL: fix the checks above")
    return 0 if report["ok"] else 1


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "doctor", help="check this host's cluster setup (PASS/INFO/WARN/FAIL)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Checks: liveness-anchor, host-name, roster, legacy-roster, cloud-env,\n"
                    "accounts-env, event-log, latch, directories, metrics-token, scrape-tls,\n"
                    "tracker-budget.\n"


                    "accounts-env, event-log, latch, directories, tracker-budget,\n"
                    "account-health (the running monitor's last probe of each account).\n"
                    "A host with no roster and no anchor is not in a cluster: its\n"
                    "cluster checks are INFO.\n"
                    "Each is PASS, INFO, WARN or FAIL.\n"
                    "Exit 1 when any check FAILs.")
    p.add_argument("--json", action="store_true", help="print {ok, checks[{name, status, detail}]} as JSON")
    p.set_defaults(func=cmd_doctor)
