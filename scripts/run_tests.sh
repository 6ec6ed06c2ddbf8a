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
# pytest workers for the default interpreter's run (tests mostly wait on their subprocesses).
WORKERS=${SVC_TEST_WORKERS:-3}
# A run that has not finished by then is stuck, not slow.
RUN_TIMEOUT_S=${SVC_TEST_RUN_TIMEOUT_S:-1500}

# ------------------------------------------------------------------ what the tests need
# Debian packages, one line each: "commands it provides : packages to install". A line's packages are
# installed when any of its commands is missing. Add a line for a new one.
DEBIAN_NEEDS=(
  "chromium chromedriver : chromium chromium-driver"   # the browser tests (selenium)
  "prometheus promtool : prometheus"                   # the rule, rule-test and scrape tests
)
# pip packages for the default interpreter's whole suite (the package itself needs none at run time).
PIP_NEEDS="pytest pytest-xdist hypothesis selenium schemathesis setuptools wheel"
# pip packages for the core runs on the other interpreters.
CORE_PIP_NEEDS="pytest pytest-xdist hypothesis setuptools wheel"
# What the core runs leave out (the default interpreter runs all of it): the browser pages and the
# schemathesis conformance run (their tools are the default interpreter's), and the `serial` tests
# (load and timing figures, which need the cores to themselves; tests/conftest.py lists them).
CORE_EXCLUDES="tests/test_dashboard.py tests/test_dashboard_trajectory.py tests/test_schemathesis.py"

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

# A throw-away venv of interpreter $1 in $2 with the core's packages, then the core (or ARGS) in it.
core_run() {
  local python=$1 venv=$2 log=$3
  shift 3
  {
    "$python" -m venv "$venv" &&
      "$venv/bin/python" -m pip install -q --disable-pip-version-check $CORE_PIP_NEEDS &&
      PATH="$venv/bin:$PATH" SVC_TEST_CORE=1 timeout "$RUN_TIMEOUT_S" \
        "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
  } >"$log" 2>&1
}

# pytest on the default interpreter; its exit code in $code.
main_run() {
  set +e
  timeout "$RUN_TIMEOUT_S" "$PY" -m pytest -q -p no:cacheprovider "$@"
  code=$?
  set -e
}

install_debian_needs
"$PY" -m pip install -q --disable-pip-version-check -e . $PIP_NEEDS

if [ $# -gt 0 ]; then
  CORE_ARGS=("$@")
else
  CORE_ARGS=(-n 2 -m "not serial")
  for f in $CORE_EXCLUDES; do CORE_ARGS+=("--ignore=$f"); done
fi

# The other interpreters' core runs go in the background, beside the main run.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/svc-run-tests.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
declare -A PID_OF=() LOG_OF=() PATH_OF=()   # by version
SUMMARY=()
FAILED=0
if [ "$QUICK" = 0 ]; then
  for want in $OTHER_PYTHONS; do
    if python=$(find_python "$want"); then
      PATH_OF[$want]=$python
      LOG_OF[$want]=$WORK/core-$want.log
      core_run "$python" "$WORK/venv-$want" "${LOG_OF[$want]}" "${CORE_ARGS[@]}" &
      PID_OF[$want]=$!
      say "Python $(version_of "$python") ($python): core run started in a throw-away venv"
    elif [ -n "${CI:-}" ]; then
      SUMMARY+=("Python $want: FAILED (no interpreter found: python$want on PATH, pyenv's versions/$want.*)")
      FAILED=1
    else
      SUMMARY+=("Python $want: not run (no interpreter found; CI counts this as a failure)")
    fi
  done
fi

MAIN="Python $(version_of "$PY") ($(command -v "$PY"))"
if [ $# -gt 0 ]; then
  say "$MAIN: pytest $*"
  main_run "$@"
  SUMMARY=("$MAIN, pytest $*: $(verdict $code)" "${SUMMARY[@]}")
else
  say "$MAIN: the whole suite but the serial tests, $WORKERS workers"
  main_run -n "$WORKERS" -m "not serial"
  SUMMARY=("$MAIN, whole suite in parallel: $(verdict $code)" "${SUMMARY[@]}")
fi
[ "$code" = 0 ] || FAILED=1

for want in $OTHER_PYTHONS; do
  [ -n "${PID_OF[$want]:-}" ] || continue
  set +e
  wait "${PID_OF[$want]}"
  code=$?
  set -e
  echo
  say "---- Python $want core run (${PATH_OF[$want]}) ----"
  cat "${LOG_OF[$want]}"
  SUMMARY+=("Python $(version_of "${PATH_OF[$want]}"), core: $(verdict $code)")
  [ "$code" = 0 ] || FAILED=1
done

# The serial tests last, once nothing else of this run competes for the cores.
if [ $# -eq 0 ]; then
  echo
  say "$MAIN: the serial tests, alone"
  main_run -m serial
  SUMMARY=("${SUMMARY[0]}" "$MAIN, serial tests: $(verdict $code)" "${SUMMARY[@]:1}")
  [ "$code" = 0 ] || FAILED=1
fi

echo
say "interpreters:"
for line in "${SUMMARY[@]}"; do say "  $line"; done
exit "$FAILED"
