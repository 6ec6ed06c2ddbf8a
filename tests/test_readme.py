"""Every example in README.md and docs/*.md runs, so the docs cannot rot.

The convention (docs/testing.md, "The examples are tested"), the same in every
file, by the language of the fence:

- ```sh / ```bash: commands. Logical commands (a line, its `\\` continuations,
  its here-document) run one after another with `bash -c`, from the checkout's
  root, in a temporary HOME set up as a node (see `node` below). Each must exit
  0, or N when its trailing comment is `# exits N`, and print no `Traceback`.
  - A command whose comment says `until Ctrl-C` is long-running: it is
    started in its own session, polled until the first http://127.0.0.1:PORT
    URL it prints answers (deadline, no fixed sleep), left running for the rest
    of the block, then sent SIGINT and must exit 0 with no traceback.
  - `bash scripts/run_tests.sh` is never run from inside the suite (it runs
    the suite): the test checks the script and that `.ci/run` runs exactly it.
  - A block that talks to a monitor (it mentions port 7400, `/api/` or
    `hud --once`) and does not start one itself gets one for its duration.
    Every block runs with SVC_MONITOR_PORT set to a free port, which replaces
    7400 in the block's text.
  - First line `# not run by the tests: <reason>`: skipped with that reason,
    but every script and test file it names must exist.
  - First line starting `# on the new node`: runs in a second HOME with no
    host name, a cluster repo, and `~/svc-bundle.json` exported from node-a.
- ```python: run as a script (`python3 FILE`) with the node's HOME and
  environment; exit 0 and no traceback.
- ```json: must parse.
- ```text: synopses, sample output and file contents; not run. Any other
  language fails test_every_fence_has_a_known_language, so an example cannot
  escape the test by a typo in its fence.

Each block is one test whose id is its file and line (`-k README.md:L42-`,
`-k docs/monitor.md:L30-`). Every link in those files points inside the
repository: to a file that exists and, with `#anchor`, to one of its headings.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

import pytest

from tests.support.home import (BEARER, CANARY, REPO, accounts_path, clean_env, make_cluster_repo,
                                set_host_name, write_json)
from tests.support.waiting import wait_until

README = REPO / "README.md"
DOCS = REPO / "docs"
RUN_LANGS = ("sh", "bash", "python")
KNOWN_LANGS = RUN_LANGS + ("json", "text")
CMD_TIMEOUT_S = 90.0       # one command (svc-stack restart waits for a monitor: well under this)
SERVE_TIMEOUT_S = 30.0     # a long-running command must serve within this
STOP_TIMEOUT_S = 20.0
HOST, PEER = "node-a", "node-b"
ANCHOR = "OPS-1"
SKIP_MARK = "# not run by the tests:"
NEW_NODE_MARK = "# on the new node"
RUN_TESTS = "bash scripts/run_tests.sh"
URL_RE = re.compile(r"https?://(?:127\.0\.0\.1|localhost):\d+[^\s\"'<>)]*")


# ---------------------------------------------------------------- README parsing

class Block(NamedTuple):
    line: int       # line of the opening fence in its file (1-based)
    lang: str       # first word of the info string
    text: str       # body, dedented by the fence's indentation
    file: str = "README.md"     # relative to the checkout's root

    @property
    def id(self) -> str:
        return "%s:L%d-%s" % (self.file, self.line, self.lang or "none")

    @property
    def where(self) -> str:
        return "%s line %d" % (self.file, self.line)


def documents() -> List[Path]:
    """README.md and every page under docs/, in a stable order."""
    return [README] + sorted(DOCS.glob("**/*.md"))


def fenced_blocks(text: str, file: str = "README.md") -> List[Block]:
    out: List[Block] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^( *)(`{3,}|~{3,})(.*)$", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        start = i
        body: List[str] = []
        i += 1
        closing = re.compile(r"^ *%s{%d,}\s*$" % (re.escape(fence[0]), len(fence)))
        while i < len(lines) and not closing.match(lines[i]):
            raw = lines[i]
            body.append(raw[indent:] if raw[:indent].strip() == "" else raw.lstrip())
            i += 1
        i += 1  # the closing fence
        out.append(Block(start + 1, info.split()[0] if info else "", "\n".join(body), file))
    return out


BLOCKS = fenced_blocks(README.read_text(encoding="utf-8"))
ALL_BLOCKS = [b for doc in documents()
              for b in fenced_blocks(doc.read_text(encoding="utf-8"), str(doc.relative_to(REPO)))]


class Command(NamedTuple):
    line: int       # line of its first physical line in its file
    text: str       # what bash runs (comments and here-documents included)
    comment: str    # the trailing comment of its first line, without '#'
    file: str = "README.md"

    @property
    def bare(self) -> str:
        """The command without its trailing comment, whitespace collapsed."""
        first = self.text.split("\n", 1)[0]
        return " ".join(_strip_comment(first).split())

    @property
    def expected_exit(self) -> int:
        m = re.match(r"exits (\d+)\b", self.comment)
        return int(m.group(1)) if m else 0

    @property
    def long_running(self) -> bool:
        return "until Ctrl-C" in self.comment


def _strip_comment(line: str) -> str:
    m = re.search(r"(^|\s)#", line)
    return line[:m.start()] if m else line


def _comment(line: str) -> str:
    m = re.search(r"(^|\s)#\s*(.*)$", line)
    return m.group(2).strip() if m else ""


def shell_commands(block: Block) -> List[Command]:
    lines = block.text.split("\n")
    out: List[Command] = []
    i = 0
    while i < len(lines):
        if not lines[i].strip() or lines[i].lstrip().startswith("#"):
            i += 1
            continue
        start = i
        chunk = [lines[i]]
        while _strip_comment(chunk[-1]).rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            chunk.append(lines[i])
        heredoc = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", " ".join(_strip_comment(c) for c in chunk))
        if heredoc:
            while i + 1 < len(lines):
                i += 1
                chunk.append(lines[i])
                if lines[i].strip() == heredoc.group(1):
                    break
        i += 1
        out.append(Command(block.line + 1 + start, "\n".join(chunk), _comment(chunk[0]), block.file))
    return out


def accounts_file_text() -> str:
    """The accounts env file exactly as the README's node set-up creates it."""
    for block in BLOCKS:
        if block.lang not in ("sh", "bash"):
            continue
        m = re.search(r"model-accounts\.env <<'(\w+)'\n(.*?)\n\1\n", block.text + "\n", re.S)
        if m:
            return m.group(2) + "\n"
    raise AssertionError("README creates no ~/.config/svc/model-accounts.env with a here-document")


def readme_tokens(env_text: str) -> List[str]:
    return re.findall(r"^(?:export\s+)?MODEL_TOKEN_\w+=\"?([^\s\"#]+)", env_text, re.M)


# ---------------------------------------------------------------- servers and nodes

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def provider():
    from tests.support.provider import ProviderServer
    with ProviderServer() as server:
        for token in readme_tokens(accounts_file_text()):
            server.set_account(token, five_hour=(0.42, "allowed"), seven_day=(0.61, "allowed"))
        yield server


@pytest.fixture(scope="module")
def tracker():
    from tests.support.tracker import TrackerServer
    with TrackerServer(tokens=[BEARER]) as server:
        for issue in (ANCHOR, "OPS-123", "OPS-200"):
            server.add_issue(issue)
        yield server


def beat(tracker: Any, hosts: Tuple[str, ...] = (HOST, PEER)) -> None:
    """Fresh heartbeats of both hosts on the anchor, as their monitors would publish."""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    for host in hosts:
        tracker.put_attachment(ANCHOR, "svc://heartbeat/%s" % host, subtitle=now,
                               metadata={"host": host, "publishedAt": now, "publishIntervalMs": 120000,
                                         "accountStatus": "ok", "quota": None})


def bin_dir(root: Path) -> Path:
    """svc-monitor, svc-cluster and svc-stack as `pip install .` would provide them."""
    d = root / "bin"
    d.mkdir()
    for name, family in (("svc-monitor", "monitor"), ("svc-cluster", "cluster"), ("svc-stack", "stack")):
        p = d / name
        p.write_text('#!/bin/sh\nexec "%s" -m svcposture %s "$@"\n' % (sys.executable, family))
        p.chmod(0o755)
    return d


class Node(NamedTuple):
    home: Path
    env: Dict[str, str]
    port: int


def make_home(root: Path, name: str, host: Optional[str]) -> Path:
    home = root / name
    home.mkdir(mode=0o700)
    if host:
        set_host_name(home, host)
    write_json(home / ".config" / "svc" / "cluster-secrets.json",
               {"svc": {"tracker": {"bot": {"orchestrator": {"accessToken": CANARY}}},
                        "cluster": {"livenessAnchorIssue": ANCHOR}}}, indent=None)
    path = accounts_path(home)
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(accounts_file_text())
    repo_root = root / (name + "-repo")
    repo_root.mkdir()
    make_cluster_repo(repo_root, home, roster=(HOST, PEER))
    return home


def node_environ(home: Path, bindir: Path, provider: Any, tracker: Any, port: int) -> Dict[str, str]:
    env = clean_env(home)
    env.update({
        "PATH": "%s%s%s" % (bindir, os.pathsep, os.environ.get("PATH", "/usr/bin:/bin")),
        "SVC_PROVIDER_URL": provider.url,
        "SVC_QUOTA_SAMPLER": "0",
        "SVC_TRACKER_URL": tracker.url,
        "SVC_LOKI_URL": "http://127.0.0.1:9",
        "SVC_MONITOR_PORT": str(port),
        "SVC_SSE_KEEPALIVE_S": "1",
        "SVC_PROBE_TIMEOUT_S": "5",
        "GIT_TERMINAL_PROMPT": "0",
        "NO_COLOR": "1",
    })
    return env


@pytest.fixture
def node(tmp_path: Path, provider: Any, tracker: Any) -> Iterator[Node]:
    beat(tracker)
    home = make_home(tmp_path, "home", HOST)
    port = free_port()
    n = Node(home, node_environ(home, bin_dir(tmp_path), provider, tracker, port), port)
    yield n
    stop_leftover_monitor(home)


def stop_leftover_monitor(home: Path) -> None:
    """A monitor a failed block left running (svc-stack start without stop): end it by its pid,
    after checking that it is this test's (its HOME is this node's)."""
    for name in ("monitor.pid", "monitor.json"):
        f = home / "svc" / "run" / name
        try:
            raw = f.read_text().strip()
            pid = int(json.loads(raw)["pid"]) if name.endswith(".json") else int(raw.split()[0])
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            continue
        try:
            environ = Path("/proc/%d/environ" % pid).read_bytes().split(b"\0")
        except OSError:
            continue
        if ("HOME=%s" % home).encode() not in environ:
            continue
        try:
            os.kill(pid, signal.SIGTERM)
            wait_until(lambda: not Path("/proc/%d" % pid).exists() or _zombie(pid), timeout=STOP_TIMEOUT_S,
                       message="leftover monitor %d to stop" % pid)
        except (OSError, AssertionError):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _zombie(pid: int) -> bool:
    try:
        return ") Z " in Path("/proc/%d/stat" % pid).read_text()
    except OSError:
        return True


# ---------------------------------------------------------------- running

def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


class Background:
    """A long-running command (or a monitor the block needs), in its own session."""

    def __init__(self, cmd: List[str], env: Dict[str, str], log: Path) -> None:
        self.log = log
        self._fh = open(str(log), "wb")
        self.proc = subprocess.Popen(cmd, cwd=str(REPO), env=env, stdin=subprocess.DEVNULL,
                                     stdout=self._fh, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log.read_bytes().decode("utf-8", "replace")

    def wait_serving(self, url: Optional[str] = None) -> str:
        def ready() -> Optional[str]:
            if self.proc.poll() is not None:
                raise AssertionError("exited %s before serving" % self.proc.returncode)
            target = url
            if target is None:
                m = URL_RE.search(self.output())
                target = m.group(0) if m else None
            return target if target and http_ok(target) else None
        return wait_until(ready, timeout=SERVE_TIMEOUT_S, interval=0.1, message="a URL that answers")

    def stop(self, sig: int = signal.SIGINT) -> int:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except OSError:
                pass
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._fh.close()
        return self.proc.returncode


def check_run_tests_command() -> None:
    """What the README's second command is, instead of running the suite inside itself."""
    script = REPO / "scripts" / "run_tests.sh"
    assert script.is_file(), "scripts/run_tests.sh is missing"
    assert re.search(r"-m pytest\b", script.read_text()), "scripts/run_tests.sh does not run pytest"
    ci = (REPO / ".ci" / "run").read_text()
    runs = [line.strip() for line in ci.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert "exec " + RUN_TESTS in runs, ".ci/run does not run exactly `%s`: %r" % (RUN_TESTS, runs)


def run_command(text: str, env: Dict[str, str], log: Path) -> Tuple[Optional[int], str]:
    """(exit code, output) of one command run by bash; (None, output) past CMD_TIMEOUT_S, when its
    whole session (whatever it started) is killed, so no stray process outlives the test."""
    with open(str(log), "wb") as fh:
        proc = subprocess.Popen(["bash", "-c", text], cwd=str(REPO), env=env, stdin=subprocess.DEVNULL,
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code: Optional[int] = proc.wait(timeout=CMD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    return code, log.read_bytes().decode("utf-8", "replace")


def failure(cmd: Command, why: str, output: str) -> str:
    return "%s line %d: `%s` %s\n--- output ---\n%s" % (cmd.file, cmd.line, cmd.bare, why, output[-4000:])


def run_shell_block(block: Block, node: Node, tmp_path: Path) -> None:
    text = block.text.replace("7400", str(node.port))
    commands = shell_commands(block._replace(text=text))
    assert commands, "%s: a shell block with no command" % block.where
    background: List[Tuple[Command, Background]] = []
    starts_monitor = any(c.long_running or re.search(r"svc-stack (start|restart)", c.bare) for c in commands)
    if not starts_monitor and re.search(r"7400|/api/|hud --once", block.text):
        monitor = Background([sys.executable, "-m", "svcposture", "monitor"], node.env,
                             tmp_path / "needed-monitor.log")
        needed = Command(block.line, "svc-monitor", "started by the test for this block", block.file)
        background.append((needed, monitor))
        try:
            monitor.wait_serving("http://127.0.0.1:%d/healthz" % node.port)
        except AssertionError as exc:
            monitor.stop(signal.SIGKILL)
            pytest.fail(failure(needed, "(the monitor this block needs) did not serve: %s" % exc, monitor.output()))
    error: Optional[BaseException] = None
    try:
        for i, cmd in enumerate(commands):
            if cmd.bare == RUN_TESTS:
                check_run_tests_command()
                continue
            if cmd.long_running:
                proc = Background(["bash", "-c", cmd.text], node.env, tmp_path / ("bg-%d.log" % i))
                try:
                    proc.wait_serving()
                except AssertionError as exc:
                    proc.stop(signal.SIGKILL)
                    pytest.fail(failure(cmd, "did not serve: %s" % exc, proc.output()))
                background.append((cmd, proc))
                continue
            code, out = run_command(cmd.text, node.env, tmp_path / ("cmd-%d.log" % i))
            if code is None:
                pytest.fail(failure(cmd, "ran over %.0f s" % CMD_TIMEOUT_S, out))
            if code != cmd.expected_exit:
                pytest.fail(failure(cmd, "exited %d, expected %d" % (code, cmd.expected_exit), out))
            if "Traceback" in out:
                pytest.fail(failure(cmd, "printed a traceback", out))
    except BaseException as exc:  # pytest.fail included: reported with what the stop finds below
        error = exc
    finally:
        problems = []
        for cmd, proc in reversed(background):
            code = proc.stop(signal.SIGINT)
            out = proc.output()
            if code != 0:
                problems.append(failure(cmd, "exited %s on Ctrl-C" % code, out))
            elif "Traceback" in out:
                problems.append(failure(cmd, "printed a traceback", out))
    if error is not None:
        if problems:
            pytest.fail("%s\n%s" % (error, "\n".join(problems)))
        raise error
    if problems:
        pytest.fail("\n".join(problems))


def new_node(tmp_path: Path, first: Node, provider: Any, tracker: Any) -> Node:
    """The node a `# on the new node` block runs on: no host name, a bundle from `first`."""
    home = make_home(tmp_path, "new-home", None)
    (home / ".config" / "svc" / "cluster-secrets.json").unlink()
    bundle = home / "svc-bundle.json"
    done = subprocess.run([sys.executable, "-m", "svcposture", "cluster", "bundle", "export", "--out", str(bundle)],
                          cwd=str(REPO), env=first.env, capture_output=True, text=True, timeout=CMD_TIMEOUT_S)
    assert done.returncode == 0 and bundle.is_file(), "bundle export on node-a failed:\n" + done.stderr
    port = free_port()
    return Node(home, node_environ(home, Path(first.env["PATH"].split(os.pathsep)[0]), provider, tracker, port),
                port)


def named_paths(text: str) -> List[str]:
    names = re.findall(r"(?<![\w/.-])((?:scripts|tests)/[\w.*/-]+)", text)
    names += ["scripts/%s.py" % m for m in re.findall(r"-m scripts\.(\w+)", text)]
    return names


RUNNABLE = [b for b in ALL_BLOCKS if b.lang in RUN_LANGS + ("json",)]


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_readme_block(block: Block, request: Any, tmp_path: Path) -> None:
    if block.lang == "json":
        try:
            json.loads(block.text)
        except ValueError as exc:
            pytest.fail("%s: the json block does not parse: %s" % (block.where, exc))
        return
    first = block.text.lstrip().split("\n", 1)[0].strip()
    if first.startswith(SKIP_MARK):
        reason = first[len(SKIP_MARK):].strip()
        assert reason, "%s: say why the block is not run" % block.where
        missing = [p for p in named_paths(block.text) if not list(REPO.glob(p))]
        assert not missing, "%s names files that do not exist: %s" % (block.where, missing)
        pytest.skip("%s: %s" % (block.where, reason))
    n = request.getfixturevalue("node")
    if first.startswith(NEW_NODE_MARK):
        n = new_node(tmp_path, n, request.getfixturevalue("provider"), request.getfixturevalue("tracker"))
    if block.lang == "python":
        script = tmp_path / ("doc_L%d.py" % block.line)
        script.write_text(block.text)
        try:
            done = subprocess.run([sys.executable, str(script)], cwd=str(REPO), env=n.env, capture_output=True,
                                  timeout=CMD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail("%s: the python block ran over %.0f s" % (block.where, CMD_TIMEOUT_S))
        out = (done.stdout + done.stderr).decode("utf-8", "replace")
        if done.returncode != 0 or "Traceback" in out:
            pytest.fail("%s: the python block exited %d\n--- output ---\n%s"
                        % (block.where, done.returncode, out))
        return
    try:
        run_shell_block(block, n, tmp_path)
    finally:
        if n.home.name == "new-home":
            stop_leftover_monitor(n.home)


# ---------------------------------------------------------------- the README's shape

def test_every_fence_has_a_known_language() -> None:
    odd = [(b.where, b.lang) for b in ALL_BLOCKS if b.lang not in KNOWN_LANGS]
    assert not odd, "fences must be one of %s (where, language): %s" % (KNOWN_LANGS, odd)


def test_it_opens_with_the_two_commands() -> None:
    first = BLOCKS[0]
    assert first.lang == "sh" and first.line <= 20
    assert [c.bare for c in shell_commands(first)] == ["python3 -m svcposture monitor demo", RUN_TESTS]
    check_run_tests_command()


def test_the_first_screen_is_the_start() -> None:
    heads = [(i + 1, line) for i, line in enumerate(README.read_text(encoding="utf-8").split("\n"))
             if line.startswith("## ")]
    wanted = ["## Start here", "## Make this host a node", "## Use it as a library", "## Where the fleet view is",
              "## Contents"]
    found = [h for h in heads if h[1] in wanted]
    assert [h[1] for h in found] == wanted, heads
    assert found[-1][0] <= 160, "the start runs past the first screen: %s" % found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def prose_of(text: str) -> str:
    """The text without its fenced blocks (a `# comment` in a block is no heading, a `](x)` no link)."""
    return re.sub(r"^( *)(```|~~~).*?^\1\2\s*$", "", text, flags=re.S | re.M)


def anchors_of(text: str) -> Set[str]:
    """Every heading's anchor, a repeated one numbered as GitHub does (`environment`, `environment-1`)."""
    seen: Dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^(#{1,6}) (.+)$", prose_of(text), re.M):
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else "%s-%d" % (base, n))
    return out


def bad_links(doc: Path, text: str, root: Path = REPO) -> List[str]:
    """The links of one document that a fresh clone cannot follow: outside the checkout (`../shared/`),
    to a missing file, or to a heading its target does not have. The only absolute URLs allowed are the
    node's own (http://127.0.0.1)."""
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose_of(text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):
            if not target.startswith("http://127.0.0.1"):
                bad.append(target + " (links must be relative)")
            continue
        path, _, anchor = target.partition("#")
        if not path:
            if anchor not in anchors_of(text):
                bad.append(target + " (no such heading)")
            continue
        dest = Path(os.path.normpath(str(doc.parent / path)))
        if path.startswith("/") or not (dest == root or root in dest.parents):
            bad.append(target + " (outside the repository)")
        elif not dest.exists():
            bad.append(target + " (no such file)")
        elif anchor and (not dest.is_file() or anchor not in anchors_of(dest.read_text(encoding="utf-8"))):
            bad.append(target + " (no such heading)")
    return bad


@pytest.mark.parametrize("doc", documents(), ids=[str(d.relative_to(REPO)) for d in documents()])
def test_links_resolve(doc: Path) -> None:
    bad = bad_links(doc, doc.read_text(encoding="utf-8"))
    assert not bad, "%s: %s" % (doc.relative_to(REPO), bad)


def test_a_link_a_clone_cannot_follow_is_caught(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# Page\n\n## A part\n\n## A part\n")
    doc = tmp_path / "README.md"
    good = "[a](docs/page.md) [b](docs/page.md#a-part-1) [c](#top) [d](http://127.0.0.1:7400/) [e](docs/)"
    assert bad_links(doc, "# Top\n" + good, tmp_path) == []
    hostile = ["../shared/spec.md", "../shared/", "docs/missing.md", "docs/page.md#nowhere", "#nowhere",
               "/etc/passwd", "docs/../../x.md", "https://example.com/", "file:///etc/passwd"]
    found = bad_links(doc, "# Top\n" + " ".join("[x](%s)" % h for h in hostile), tmp_path)
    assert [f.split(" ")[0] for f in found] == hostile, found
    assert bad_links(doc, "```text\n[x](../shared/)\n```\n", tmp_path) == []   # a sample in a block is no link


def test_the_docs_index_links_every_page() -> None:
    index = DOCS / "README.md"
    linked = {os.path.normpath(str(index.parent / t.partition("#")[0]))
              for t in re.findall(r"\]\(([^)\s#]+)[^)\s]*\)", prose_of(index.read_text(encoding="utf-8")))}
    pages = [d for d in DOCS.glob("**/*.md") if d != index]
    missing = [str(d.relative_to(REPO)) for d in pages if str(d) not in linked]
    assert pages and not missing, "docs/README.md does not link: %s" % missing


def test_making_a_node_says_how_to_get_each_credential() -> None:
    # "Paste the tokens" is not enough: the README's node steps, the init reference and the Codex
    # page name the commands that make each vendor's long-lived credential.
    readme = README.read_text(encoding="utf-8")
    step = readme[readme.index("svc-monitor init     #"):readme.index("**3. Run the monitor.**")]
    assert "`claude setup-token`" in step and "CODEX_HOME=~/.codex-work codex login" in step
    monitor = (DOCS / "monitor.md").read_text(encoding="utf-8")
    init = monitor[monitor.index("## svc-monitor init"):monitor.index("## HUD strip")]
    assert "`claude setup-token`" in init and "`CODEX_HOME=<dir> codex login`" in init
    codex = (DOCS / "codex.md").read_text(encoding="utf-8")
    assert "CODEX_HOME=~/.codex-work codex login" in codex[:1500]
