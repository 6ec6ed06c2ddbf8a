"""What a vendor package implements (docs/vendors.md): one `Vendor` protocol, below every vendor.

A vendor is one kind of model-provider account a node can hold (Claude's
`MODEL_TOKEN_*` tokens, Codex's `CODEX_HOME_*` logins). Everything about it
that differs from another vendor lives in its package and is reached through
the members below; everything else of the package (posture service, history,
forecasts, alerts, guard, switch, routes, metrics, pages) loops over the
registered vendors (`vendors.registered()`) and names none.

This module only describes; it imports no vendor, so every vendor package may
import it. The registry, which imports the built-in vendors, is `vendors`.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Protocol, Tuple

from .errors import SvcpostureError

# A vendor's name and its label prefix: lower case letters, digits and underscores.
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
# A vendor's knob is one of the package's variables: SVC_ and upper-case letters, digits and _.
_KNOB_RE = re.compile(r"^SVC_[A-Z0-9_]{1,64}$")
# A line init writes into the accounts env file: printable ASCII, no line break.
_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*")


class InvalidVendor(SvcpostureError, ValueError):
    """A vendor that cannot be registered: bad name, a name or label prefix already taken."""


class EnvLines(NamedTuple):
    """A vendor's lines in the accounts env file (docs/posture.md).

    An account is `[export ]<entry_prefix><NAME>=<value>  # <email>`; its label
    is `<label_prefix><name in lower case>`; the active account is the one the
    line `export <active_var>="$<entry_prefix><NAME>"` names. A value that is
    empty or one of `placeholders` is not filled in.
    """

    entry_prefix: str
    active_var: str
    label_prefix: str
    placeholders: Tuple[str, ...]

    def entry_re(self) -> "re.Pattern[str]":
        """The line pattern, capturing (NAME, the rest of the line)."""
        return re.compile(r"^\s*(?:export\s+)?%s([A-Za-z0-9_]+)=(.*)$" % re.escape(self.entry_prefix))

    def label(self, name: str) -> str:
        return self.label_prefix + name.lower()

    def export_line(self, name: str) -> str:
        """The line a switch writes to make account NAME the active one."""
        return 'export %s="$%s%s"' % (self.active_var, self.entry_prefix, name)

    def owns_var(self, var: str) -> bool:
        """Whether `var` is one of this vendor's account variables, which only the file may set for a child."""
        return var == self.active_var or var.startswith(self.entry_prefix)


class Knob(NamedTuple):
    """One environment variable a vendor package reads (docs/settings.md): its base URL, its probe model.

    Declared in the vendor's package, listed in its `knobs`, and read only
    through `settings.knob_value(environ, knob)`: the monitor's Settings read
    every registered vendor's knobs through the registry, the vendor's code in
    the probe child (which has only an environment) reads each the same way.
    `parse` gets the stripped text of a set, non-blank variable and returns the
    value; a ValueError from it gives `default`, as unset does. `internal`
    marks a variable the monitor sets for its own child (never an operator's
    setting): it is read the same way but is no part of Settings.
    """

    name: str
    default: Any
    doc: str
    parse: Callable[[str], Any]
    internal: bool = False


class VendorSweep(Protocol):
    """One vendor's part of a run of the token-scoped child (docs/posture.md).

    Built from the sourced file's text and the child's environment; `present`
    says whether the file has a line of this vendor at all, `secrets` are the
    token values it holds (every vendor's rows are scrubbed of every secret).
    """

    present: bool
    secrets: List[str]

    def check(self) -> Optional[Dict[str, Any]]:
        """What `probe check` lists (no network): usable, unusable, active, duplicateActive."""

    def submit(self, pool: Any, timeout_s: float, secrets: List[str]) -> List[Any]:
        """Start one exchange per account on `pool`; the futures."""

    def block(self, cut: str = "sweep") -> Optional[Dict[str, Any]]:
        """The vendor's report once its futures are done or abandoned (None with no line); an exchange
        still running is a timeout, `cut` saying whose deadline ended it: `exchange` (the vendor's own)
        or `sweep`."""


class PollMemory(Protocol):
    """What the monitor remembers of a vendor's accounts between runs (floors, newest samples).

    It may also have `floor_s`, the least time between two readings of one account (Codex's
    usage floor): an account's health is judged stale against it when it is longer than the
    probe interval (docs/posture.md, "Health").
    """

    def child_environ(self, environ: Mapping[str, str], node: Optional[str], hosts: Optional[List[str]] = None,
                      live: Optional[List[str]] = None) -> Dict[str, str]:
        """The next child's environment: `environ` plus what the child must know (no token)."""

    def absorb(self, block: Any, now_ms: Optional[int] = None) -> None:
        """Remember one run's block."""


class Vendor(Protocol):
    """One vendor package's face. The members, grouped by what they own:

    - `name`: the `provider` value everywhere (`?provider=`, `--provider`, metrics' label);
      `display_name`: how pages and terminals write it for a person ("Claude", "Codex");
    - `lines`: its env-file lines (pattern, label form, active variable, export line);
    - `sweep(text, environ)`: the child probe, what the token-scoped child runs for it;
      `request_timeout_s(environ)` bounds one request, `exchange_deadline_s(environ)` the
      whole exchange of one account, well under the sweep's deadline;
    - `parse_reply(reply, now_s)`: the reply parser and window placement (pure);
    - `error_kinds` and `error(kind, message, http_status)`: its error vocabulary;
    - `clean_block(value)` and `summarize(block, node, probed_at, memory)`: the
      monitor's side, the whitelisted block and the posture body for `?provider=<name>`;
    - `poll_memory()`: what the monitor keeps between runs for it, or None.

    Optional members (read through `optional_member`, absent on a vendor that has none of it):

    - `child_commands`: {subcommand: function(environ)} the token-scoped child runs besides the
      sweep (Claude: `usage` and `login`, the interactive login's usage and email);
    - `login_sampler(...)`: the service polling the interactive login's usage, and its view
      (GET /api/login);
    - `setup_help`: a `SetupHelp`, what `svc-monitor init` writes and says about getting this
      vendor's credential;
    - `demo`: a `DemoPart`, the vendor's part of `svc-monitor demo` (its demo accounts, their files
      and env-file lines, and how its endpoint answers a simulated window state);
    - `knobs`: a tuple of `Knob`, the environment variables the vendor's own code reads
      (base URL, probe model), each read through `settings.knob_value`;
    - `error_health(error)`: which account health (docs/posture.md, "Health") one of this
      vendor's account errors means: "refused" (the provider refused the credential: 401/403
      or the vendor's invalid or expired kind), "limited" (the usage endpoint rate-limited the
      reader), "unreachable" (a transport failure or timeout), or None for any other error.
    """

    name: str
    display_name: str
    lines: EnvLines
    error_kinds: Tuple[str, ...]

    def sweep(self, text: str, environ: Mapping[str, str]) -> VendorSweep:
        ...

    def request_timeout_s(self, environ: Mapping[str, str]) -> float:
        ...

    def exchange_deadline_s(self, environ: Mapping[str, str]) -> float:
        ...

    def parse_reply(self, reply: Any, now_s: float) -> Dict[str, Any]:
        ...

    def error(self, kind: str, message: Optional[str] = None, http_status: Optional[int] = None) -> Dict[str, Any]:
        ...

    def clean_block(self, value: Any) -> Optional[Dict[str, Any]]:
        ...

    def summarize(self, block: Optional[Mapping[str, Any]], node: str, probed_at: int,
                  memory: Mapping[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        ...

    def poll_memory(self) -> Optional[PollMemory]:
        ...


class SetupHelp(NamedTuple):
    """What `svc-monitor init` writes and says about one vendor's credential (the member `setup_help`).

    - `next_step`: the vendor's clause of init's first next step, which reads "Get a long-lived
      token " and then every vendor's clause, joined by "; " ("for a Codex login: CODEX_HOME=<dir>
      codex login");
    - `comment`: the lines init writes above the placeholder entries when this vendor is the
      default one, saying where its credential comes from;
    - `example`: the commented example init writes when it is not: a commented entry line and its
      export line, with what the reader needs to fill them in;
    - `renew`: what to do when the provider refuses an account's credential, the fix the advice
      names (docs/steering.md): a clause with `{who}` (the account's email, else its label) and
      `{where}` (its line of the accounts env file, or its variable when the line is not known),
      e.g. "run `claude setup-token` signed in as {who} and paste it into {where}".

    Every line is a whole comment line (it starts with `#`) of printable ASCII: the file is
    sourced as shell, so no vendor can put a live line into it (`check_vendor` refuses one).
    """

    next_step: str
    comment: Tuple[str, ...]
    example: Tuple[str, ...]
    renew: str = ""


# The demo's simulated stories (docs/vendors.md), one per demo account: `cycle` goes ok ->
# degraded -> rejected -> ok in the demo's first minutes, then climbs at a steady pace through real
# 5-hour windows (the default vendor's active account); `wall`
# climbs 30 %/h and meets its wall before its 5-hour reset; `weekly` sits near its weekly limit;
# `pace` climbs 12 %/h from 35 % with its week at 62 % (any other name is `pace`).
DEMO_TIMELINES = ("cycle", "wall", "weekly", "pace")


class DemoAccount(NamedTuple):
    """One account of a vendor's demo part: its label and the simulated story it follows."""

    label: str
    timeline: str


class DemoHome(NamedTuple):
    """What a vendor's demo accounts need in the demo home: its lines of the accounts env file (its
    accounts and its active one), and the JSON files beside them as (absolute path, document),
    which the demo writes 0600 in 0700 directories."""

    lines: Tuple[str, ...]
    files: Tuple[Tuple[Any, Any], ...]


class DemoRequest(NamedTuple):
    """One request to the demo's simulated provider: the method, the path without its query, and
    the headers with their names in lower case. The body is read and dropped by the demo."""

    method: str
    path: str
    headers: Mapping[str, str]


class DemoReply(NamedTuple):
    """A vendor's answer to a DemoRequest: the HTTP status, the JSON body and any further headers."""

    status: int
    body: Any
    headers: Tuple[Tuple[str, str], ...] = ()


class DemoPart(Protocol):
    """A vendor's part of `svc-monitor demo` (the optional member `demo`, docs/vendors.md).

    The demo runs one simulated provider on loopback for every vendor that has a part, points
    each part's `url_knobs` at it, writes each part's `home` into its temporary home, and hands
    each request to every part in registration order until one answers.

    A simulated window state, what `state(label)` returns for one of the part's accounts, is
    `{"status": <overall status>, "claim": <the binding window>, "5h": <window>, "7d": <window>}`
    with a window `(utilization, status, reset)`: the utilization a fraction (1.0 is 100 %), the
    reset in epoch seconds. The statuses are the Claude header words (`allowed`,
    `allowed_warning`, `rejected`), or None where the story gives none; a vendor whose endpoint
    sends no status word leaves them out.
    """

    accounts: Tuple[DemoAccount, ...]
    url_knobs: Tuple[Knob, ...]

    def home(self, root: Any, paths: Any) -> DemoHome:
        """The lines and files of its demo accounts; `root` is the demo's temporary directory (a
        place for directories an account names), `paths` the demo home's `paths.Paths`."""

    def answer(self, request: DemoRequest, state: Callable[[str], Dict[str, Any]],
               now_s: float) -> Optional[DemoReply]:
        """Its endpoint's reply to `request` at the demo's clock `now_s`, or None when the request
        is not for it (another part's route)."""


def check_listing(entries: List[Mapping[str, Any]], unusable: List[str], active: Optional[str],
                  duplicates: List[str]) -> Dict[str, Any]:
    """What a sweep's `check()` lists for `probe check` (no network): its usable entries' labels in
    file order, the unusable ones, the active one and any that name the active value too."""
    return {"usable": [e["label"] for e in entries], "unusable": unusable, "active": active,
            "duplicateActive": duplicates}


def optional_member(vendor: Any, name: str) -> Any:
    """A vendor's optional member (docs/vendors.md), None when it has none."""
    return getattr(vendor, name, None)


def check_vendor(vendor: Any) -> None:
    """Raise InvalidVendor unless `vendor` has every member the protocol names, with sane values."""
    missing = [m for m in ("name", "display_name", "lines", "error_kinds", "sweep", "request_timeout_s", "exchange_deadline_s",
                           "parse_reply", "error", "clean_block", "summarize", "poll_memory")
               if not hasattr(vendor, m)]
    if missing:
        raise InvalidVendor("a vendor lacks %s" % ", ".join(missing))
    if not isinstance(vendor.name, str) or not _NAME_RE.match(vendor.name):
        raise InvalidVendor("a vendor's name is lower-case letters, digits and _: %r" % (vendor.name,))
    lines = vendor.lines
    if not isinstance(lines, EnvLines) or not re.match(r"^[A-Z][A-Z0-9_]*_$", lines.entry_prefix) \
            or not re.match(r"^[A-Z][A-Z0-9_]*$", lines.active_var):
        raise InvalidVendor("vendor %s: its env lines need an upper-case prefix ending in _ and variable"
                            % vendor.name)
    if lines.label_prefix and not re.match(r"^[a-z][a-z0-9_]*-$", lines.label_prefix):
        raise InvalidVendor("vendor %s: a label prefix is lower case and ends in -" % vendor.name)
    knobs = optional_member(vendor, "knobs")
    if knobs is not None and (not isinstance(knobs, tuple) or not all(
            isinstance(k, Knob) and _KNOB_RE.match(k.name) and callable(k.parse) for k in knobs)):
        raise InvalidVendor("vendor %s: its knobs are a tuple of Knob, each named SVC_<NAME>" % vendor.name)
    if knobs and len({k.name for k in knobs}) != len(knobs):
        raise InvalidVendor("vendor %s: it declares a knob twice" % vendor.name)
    _check_setup_help(vendor.name, optional_member(vendor, "setup_help"))


def _check_setup_help(name: str, help_: Any) -> None:
    """Refuse setup help that is not a SetupHelp of whole printable ASCII comment lines."""
    if help_ is None:
        return
    lines = list(help_.comment) + list(help_.example) if isinstance(help_, SetupHelp) else None
    if lines is None or not isinstance(help_.next_step, str) or not all(
            isinstance(line, str) and line.startswith("#") and _PRINTABLE_ASCII.fullmatch(line) for line in lines):
        raise InvalidVendor("vendor %s: its setup_help is a SetupHelp whose lines are printable ASCII comments"
                            % name)
    if not isinstance(help_.renew, str) or not _PRINTABLE_ASCII.fullmatch(help_.renew) \
            or set(re.findall(r"{([^}]*)}", help_.renew)) - {"who", "where"}:
        raise InvalidVendor("vendor %s: its setup_help's renew is printable ASCII naming only {who} and {where}"
                            % name)


def knob_names(vendor: Any) -> Tuple[str, ...]:
    """The variables a vendor's knobs name (none for a vendor without `knobs`)."""
    return tuple(k.name for k in optional_member(vendor, "knobs") or ())
