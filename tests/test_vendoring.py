"""svcposture copied into another project's `_vendor/` still works, end to end.

The copy is imported as `hostpkg._vendor.svcposture`. A poisoned top-level
`svcposture` package sits first on PYTHONPATH (shadowing the checkout and any
editable install), so an absolute self-import anywhere, in the monitor or in
the probe child it spawns, fails loudly instead of quietly using the original.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

from tests.support.cli import checker_python
from tests.support.home import REPO, accounts_path, monitor_env, set_host_name, write_accounts
from tests.support.monitor import Monitor, http_get
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

POISON = ('raise ImportError("top-level svcposture imported from a vendored copy: '
          'an absolute self-import broke vendoring")\n')

IN_PROCESS = r'''
import json, sys, time, urllib.request
import hostpkg._vendor.svcposture as pkg

httpd, thread = pkg.start_server(bind="127.0.0.1", port=0)
url = "http://127.0.0.1:%d" % httpd.server_address[1]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
deadline = time.monotonic() + 30
while True:
    body = json.loads(opener.open(url + "/api/accounts", timeout=10).read())
    if body.get("status") not in (None, "unknown") or time.monotonic() > deadline:
        break
    time.sleep(0.05)
health = opener.open(url + "/healthz", timeout=10).status
httpd.shutdown()
httpd.server_close()
print(json.dumps({"body": body, "health": health, "version": pkg.__version__,
                  "top_level_imported": "svcposture" in sys.modules,
                  "modules": sorted(m for m in sys.modules if m.startswith("hostpkg"))}))
'''


@pytest.fixture
def vendored(tmp_path: Path) -> Path:
    root = tmp_path / "host"
    vendor = root / "hostpkg" / "_vendor"
    vendor.mkdir(parents=True)
    (root / "hostpkg" / "__init__.py").write_text("")
    (vendor / "__init__.py").write_text("")
    shutil.copytree(str(REPO / "svcposture"), str(vendor / "svcposture"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    poison = tmp_path / "poison" / "svcposture"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text(POISON)
    (poison / "__main__.py").write_text(POISON)
    (poison / "probe.py").write_text(POISON)
    return root


def vendor_env(home: Path, root: Path, provider_url: str) -> Dict[str, str]:
    env = monitor_env(home, provider_url)
    env["PYTHONPATH"] = "%s:%s" % (root.parent / "poison", root)
    return env


def test_vendored_copy_passes_the_vendorability_check(vendored: Path) -> None:
    checker = REPO.parent / "shared" / "tools" / "check_vendorable.py"
    if not checker.is_file():
        pytest.skip("shared/tools is not beside the repo")
    proc = subprocess.run([checker_python(), str(checker), "svcposture"], cwd=str(vendored / "hostpkg" / "_vendor"),
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr


def test_vendored_server_in_process_reads_accounts(vendored: Path, home: Path) -> None:
    set_host_name(home, "vendor-node")
    with ProviderServer() as provider:
        provider.set_account("tok-vendor-1", five_hour=(0.42, "allowed"))
        write_accounts(accounts_path(home), [("ACCT1", "tok-vendor-1", "vendor@example.com")], active="ACCT1")
        env = vendor_env(home, vendored, provider.url)
        proc = subprocess.run([sys.executable, "-c", IN_PROCESS], cwd=str(vendored), env=env,
                              capture_output=True, text=True, timeout=90)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        # The probe child ran from the vendored copy and reached the provider.
        assert provider.message_calls("tok-vendor-1") >= 1
    assert out["health"] == 200
    assert out["top_level_imported"] is False
    body = out["body"]
    assert body["available"] is True and body["status"] == "ok", body
    assert body["active"]["label"] == "acct1" and body["active"]["fiveHour"]["pct"] == 42.0


def test_vendored_monitor_and_probe_commands(vendored: Path, home: Path, tmp_path: Path) -> None:
    set_host_name(home, "vendor-node")
    with ProviderServer() as provider:
        provider.set_account("tok-vendor-2", status="rejected", five_hour=(1.01, "rejected"))
        write_accounts(accounts_path(home), [("ACCT2", "tok-vendor-2", "v2@example.com")], active="ACCT2")
        env = vendor_env(home, vendored, provider.url)
        probe = subprocess.run([sys.executable, "-m", "hostpkg._vendor.svcposture.probe", "headers", "--json"],
                               cwd=str(vendored), env=env, capture_output=True, text=True, timeout=60)
        assert "Traceback" not in probe.stderr, probe.stderr
        result = json.loads(probe.stdout.strip().splitlines()[-1])
        assert result["available"] is True, result
        rows = result["claude"]["accounts"]
        assert rows[0]["label"] == "acct2" and rows[0]["error"] is None, result
        doctor = subprocess.run([sys.executable, "-m", "hostpkg._vendor.svcposture", "cluster", "doctor", "--json"],
                                cwd=str(vendored), env=env, capture_output=True, text=True, timeout=60)
        assert "Traceback" not in doctor.stderr and doctor.returncode in (0, 1), doctor.stdout + doctor.stderr
        checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
        # The doctor's accounts-env check runs the probe child of the vendored copy.
        assert checks["accounts-env"]["status"] in ("PASS", "INFO"), checks["accounts-env"]
        monitor = Monitor(env, module="hostpkg._vendor.svcposture", cwd=str(vendored))
        monitor.start(tmp_path / "vendored-monitor.log")
        try:
            assert monitor.url
            body = wait_until(lambda: (lambda b: b if b.get("status") == "rejected" else None)(
                json.loads(http_get(monitor.url or "", "/api/accounts")[2])), 30, message="rejected posture")
            assert body["active"]["email"] == "v2@example.com"
            # The latch and the event log work from the copy too.
            wait_until(lambda: (home / "svc" / "account-status-latch.json").is_file(), 10, message="latch file")
        finally:
            code = monitor.stop()
        assert code == 0, monitor.stderr_text()
        assert "Traceback" not in monitor.stderr_text()
