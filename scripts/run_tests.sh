#!/usr/bin/env bash
# Installs what the test suite needs on a bare machine, then runs all of it.
# .ci/run runs exactly this script; so does a newcomer (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# Debian packages for the browser test; installed only when missing.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
  else
    echo "run_tests: chromium/chromedriver missing and cannot apt-get install them" >&2
  fi
fi

# Debian's Prometheus (prometheus, promtool) for the rule and scrape tests; only when missing.
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  else
    echo "run_tests: prometheus/promtool missing and cannot apt-get install them" >&2
  fi
fi

# Debian's VictoriaMetrics for the fleet engine tests; only when missing.
if ! command -v victoria-metrics >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends victoria-metrics >/dev/null
  else
    echo "run_tests: victoria-metrics missing and cannot apt-get install it" >&2
  fi
fi

# Debian's Alertmanager (prometheus-alertmanager, amtool) for the grouping tests; only when missing.
if ! command -v prometheus-alertmanager >/dev/null 2>&1 || ! command -v amtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus-alertmanager >/dev/null
  else
    echo "run_tests: prometheus-alertmanager/amtool missing and cannot apt-get install them" >&2
  fi
fi

"$PY" -m pip install -q --disable-pip-version-check -e . pytest hypothesis selenium schemathesis
exec "$PY" -m pytest -q -p no:cacheprovider "$@"
