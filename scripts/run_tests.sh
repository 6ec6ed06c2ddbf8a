#!/usr/bin/env bash
# Installs what the test suite needs on a bare machine, then runs it: the whole suite on the default
# interpreter, and its core again on the oldest supported Python (3.9) and the newest stable one (3.13),
# each in a throw-away virtual environment. .ci/run runs exactly this script; so does a newcomer.
#
#   bash scripts/run_tests.sh                  # everything, as CI runs it
#   bash scripts/run_tests.sh --quick          # the default interpreter only, for local loops
#   bash scripts/run_tests.sh [--quick] ARGS   # pytest ARGS (files, -k ...) on each interpreter instead
#
# docs/testing.md says what runs where and why.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
# The other interpreters, by version; each one missing is a failure under CI, a warning elsewhere.
OTHER_PYTHONS=${SVC_TEST_PYTHONS-"3.9 3.13"}
# pytest-xdist workers: the default interpreter's run, and each core run beside it. Tests mostly wait
# on their subprocesses, so a 2-core machine keeps up with 4 + 2 + 2. Each file runs whole,
# in order, on one worker (--dist loadfile): a module-scoped monitor sees its tests as in a plain run.
WORKERS=${SVC_TEST_WORKERS:-4}
CORE_WORKERS=${SVC_TEST_CORE_WORKERS:-2}
# A run that has not finished by then is stuck, not slow.
RUN_TIMEOUT_S=${SVC_TEST_RUN_TIMEOUT_S:-1500}

# ------------------------------------------------------------------ what the tests need
# Debian packages, one line each: "commands it provides : packages to install". A line's packages are
# installed when any of its commands is missing. Add a line for a new one.
DEBIAN_NEEDS=(
  "chromium chromedriver : chromium chromium-driver"   # the browser tests (selenium)
  "prometheus promtool : prometheus"                   # the rule, rule-test and scrape tests
  "victoria-metrics : victoria-metrics"                # the fleet engine tests (remote_write, 10,000-host import)
  "prometheus-alertmanager amtool : prometheus-alertmanager"   # the grouped-notification and config tests
  "node npm : nodejs npm"                              # axe-core for the page audits; the pages' own scripts
)
# pip packages for the default interpreter's whole suite (the package itself needs none at run time).
PIP_NEEDS="pytest pytest-xdist hypothesis selenium schemathesis setuptools wheel mcp"
# npm packages for the default interpreter's whole suite, each directory with its package.json: axe-core, the
# current 4.x, that tests/test_pages_axe.py audits the pages with.
NPM_NEEDS="tests/support/axe"
# pip packages for the core runs on the other interpreters.
CORE_PIP_NEEDS="pytest pytest-xdist hypothesis setuptools wheel"
# What the core runs leave out; the default interpreter runs all of it. The browser pages and the
# schemathesis run (their tools are the default interpreter's); the `serial` tests (load figures that
# need the cores to themselves; tests/conftest.py lists them); and the long end-to-end scenarios, which
# exercise timing across several processes rather than the interpreter: kill -9 crashes, the env-file
# swap race, the token-leak memory scan, multi-monitor clusters, Prometheus, 500-host fleets, and the
# doc examples; and the test of this script. docs/testing.md gives the reasons.
CORE_EXCLUDES="tests/monitor/test_dashboard.py tests/monitor/test_dashboard_trajectory.py tests/cluster/test_fleet_page.py
  tests/monitor/test_schemathesis.py tests/test_crash_edges.py tests/probe/test_hostile_envswap.py tests/test_leak_tokens.py
  tests/cluster/test_anchor_move.py tests/claude/test_usage_budget.py tests/monitor/test_prometheus.py tests/cluster/test_fleet_status.py
  tests/posture/test_reset_probe.py tests/test_readme.py tests/test_run_tests.py tests/cluster/test_fleet_engines.py
  tests/cluster/test_tracker_budget.py tests/codex/test_codex_pages.py tests/codex/test_codex_schemathesis.py
  tests/test_pages_browser.py tests/demo/test_first_look_demo.py tests/test_reserve_config.py
  tests/test_page_round_trip.py tests/test_pages_axe.py tests/test_pages_glance.py tests/test_pages_stopped.py
  tests/monitor/test_trickling_upstreams.py tests/trajectory/test_hook_confinement.py tests/steering/test_auto_switch.py
  tests/cluster/test_mirror_join.py tests/cluster/test_promread.py tests/cluster/test_fleet_scale.py tests/cluster/test_fleet_accounts.py
  tests/mcp/test_mcp.py tests/probe/test_vendor_deadlines.py tests/steering/test_one_advice.py tests/claude/test_login_profile.py
  tests/envfile/test_child_cwd.py tests/test_field_replies.py tests/test_third_vendor.py tests/test_third_vendor_fleet.py
  tests/steering/test_advice_http.py tests/steering/test_switch_hostile.py tests/cluster/test_heartbeat_claims.py tests/codex/test_codex_token_pieces.py
  tests/monitor/test_monitor_url.py tests/mcp/test_mcp_hostile.py tests/probe/test_accounts_lint.py
  tests/test_third_vendor_dashboard.py tests/monitor/test_scrape_prometheus.py tests/copilot/test_copilot_node.py
  tests/zai/test_zai_node.py tests/kimi/test_kimi_node.py tests/cluster/test_dispatch.py"

QUICK=0
if [ "${1:-}" = "--quick" ]; then
  QUICK=1
  shift
fi

say() { echo "run_tests: $*"; }

install_debian_needs() {
  local line commands packages missing=() cmd
  for line in "${DEBIAN_NEEDS[@]}"; do
    commands=${line%%:*}
    packages=${line#*:}
    for cmd in $commands; do
      if ! command -v "$cmd" >/dev/null 2>&1; then
        missing+=($packages)
        break
      fi
    done
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    say "missing ${missing[*]} and cannot apt-get install them" >&2
  fi
}

# The path of an interpreter of version $1 (e.g. 3.9): on PATH, pyenv's, or the system's.
find_python() {
  local want=$1 root candidate
  root=$( (pyenv root 2>/dev/null) || echo "${PYENV_ROOT:-$HOME/.pyenv}")
  for candidate in "python$want" $(ls -d "$root"/versions/"$want".*/bin/python"$want" 2>/dev/null | sort -rV) \
                   "/usr/local/bin/python$want" "/usr/bin/python$want"; do
    candidate=$(command -v "$candidate" 2>/dev/null) || continue
    if "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != tuple(int(p) for p in '$want'.split('.')))" \
         >/dev/null 2>&1; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

version_of() { "$1" -c 'import platform; print(platform.python_version())'; }

# pytest's own exit codes, as words; 5 (no test collected) is a failure, not a pass.
verdict() {
  case $1 in
    0) echo "passed" ;;
    5) echo "FAILED (pytest ran no test)" ;;
    124) echo "FAILED (over ${RUN_TIMEOUT_S} s)" ;;
    *) echo "FAILED (exit $1)" ;;
  esac
}

# A throw-away venv of interpreter $1 in $2 with the core's packages (output to $3).
make_venv() {
  "$1" -m venv "$2" >>"$3" 2>&1 &&
    "$2/bin/python" -m pip install -q --disable-pip-version-check $CORE_PIP_NEEDS >>"$3" 2>&1 &&
    byte_compile "$2/bin/python" >>"$3" 2>&1
}

# The tests start thousands of Python children with PYTHONDONTWRITEBYTECODE set (so that no run leaves
# bytecode of its own behind): compiled once here, for interpreter $1, they read it instead of each
# compiling the package again (__pycache__ is ignored by git).
byte_compile() {
  "$1" -m compileall -q svcposture tests scripts >/dev/null || true   # a file that does not compile fails its tests
}

# pytest in the venv $1 (output to $2): its python and scripts first on PATH, so a test's `python3` is it too.
core_run() {
  local venv=$1 log=$2
  shift 2
  PATH="$venv/bin:$PATH" SVC_TEST_CORE=1 timeout "$RUN_TIMEOUT_S" \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" >>"$log" 2>&1
}

# pytest on the default interpreter; its exit code in $code.
main_run() {
  set +e
  timeout "$RUN_TIMEOUT_S" "$PY" -m pytest -q -p no:cacheprovider "$@"
  code=$?
  set -e
}

# SVC_TEST_NO_INSTALL=1 skips the installs: the suite's own test of this script sets it.
if [ -z "${SVC_TEST_NO_INSTALL:-}" ]; then
  install_debian_needs
  "$PY" -m pip install -q --disable-pip-version-check -e . $PIP_NEEDS
  for dir in $NPM_NEEDS; do
    npm install --prefix "$dir" --no-audit --no-fund --no-package-lock --loglevel=error >/dev/null
  done
  byte_compile "$PY"
fi

if [ $# -gt 0 ]; then
  CORE_ARGS=("$@")
else
  CORE_ARGS=(-n "$CORE_WORKERS" --dist loadfile -m "not serial")
  for f in $CORE_EXCLUDES; do CORE_ARGS+=("--ignore=$f"); done
fi

# Each other interpreter's job, in the background from the start: its throw-away venv, then its core run,
# side by side with the main run. The tests mostly wait on their subprocesses, so the cores have room for
# both; the serial tests still run last, alone. The job's exit code is the core run's, or VENV_FAILED when
# the venv could not be made; it writes how long its core run took to $WORK/core-VERSION.seconds.
VENV_FAILED=97
core_job() {
  local want=$1 python=$2 venv=$WORK/venv-$1 log=$WORK/core-$1.log started
  make_venv "$python" "$venv" "$log" || return "$VENV_FAILED"
  started=$SECONDS
  set +e
  core_run "$venv" "$log" "${CORE_ARGS[@]}"
  local code=$?
  set -e
  echo $((SECONDS - started)) >"$WORK/core-$want.seconds"
  return "$code"
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/svc-run-tests.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
declare -A PID_OF=() PATH_OF=()   # by version
SUMMARY=()
FAILED=0
if [ "$QUICK" = 0 ]; then
  for want in $OTHER_PYTHONS; do
    if python=$(find_python "$want"); then
      PATH_OF[$want]=$python
      core_job "$want" "$python" &
      PID_OF[$want]=$!
      say "Python $(version_of "$python") ($python): its throw-away venv, then its core run, beside the main run"
    elif [ -n "${CI:-}" ]; then
      SUMMARY+=("Python $want: FAILED (no interpreter found: python$want on PATH, pyenv's versions/$want.*)")
      FAILED=1
    else
      SUMMARY+=("Python $want: not run (no interpreter found; CI counts this as a failure)")
    fi
  done
fi

MAIN="Python $(version_of "$PY") ($(command -v "$PY"))"
began=$SECONDS
if [ $# -gt 0 ]; then
  say "$MAIN: pytest $*"
  main_run "$@"
  SUMMARY=("$MAIN, pytest $*: $(verdict $code) ($((SECONDS - began)) s)" "${SUMMARY[@]}")
else
  say "$MAIN: the whole suite but the serial tests, $WORKERS workers"
  main_run -n "$WORKERS" --dist loadfile -m "not serial"
  SUMMARY=("$MAIN, whole suite in parallel: $(verdict $code) ($((SECONDS - began)) s)" "${SUMMARY[@]}")
fi
[ "$code" = 0 ] || FAILED=1

for want in $OTHER_PYTHONS; do
  [ -n "${PID_OF[$want]:-}" ] || continue
  set +e
  wait "${PID_OF[$want]}"
  code=$?
  set -e
  echo
  if [ "$code" = "$VENV_FAILED" ]; then
    say "---- Python $want: its venv could not be made ----"
    cat "$WORK/core-$want.log"
    SUMMARY+=("Python $(version_of "${PATH_OF[$want]}"), core: FAILED (no venv with $CORE_PIP_NEEDS)")
    FAILED=1
    continue
  fi
  say "---- Python $want core run (${PATH_OF[$want]}) ----"
  cat "$WORK/core-$want.log"
  SUMMARY+=("Python $(version_of "${PATH_OF[$want]}"), core: $(verdict $code) ($(cat "$WORK/core-$want.seconds" 2>/dev/null || echo "?") s)")
  [ "$code" = 0 ] || FAILED=1
done

# The serial tests last, once nothing else of this run competes for the cores.
if [ $# -eq 0 ]; then
  echo
  say "$MAIN: the serial tests, alone"
  began=$SECONDS
  main_run -m serial
  SUMMARY=("${SUMMARY[0]}" "$MAIN, serial tests: $(verdict $code) ($((SECONDS - began)) s)" "${SUMMARY[@]:1}")
  [ "$code" = 0 ] || FAILED=1
fi

echo
say "interpreters (${SECONDS} s in all):"
for line in "${SUMMARY[@]}"; do say "  $line"; done
exit "$FAILED"
