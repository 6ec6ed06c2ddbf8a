"""A neighbour swapping the accounts env file between the check and the source.

For 10 s an attacker thread swaps the file, as fast as it can, between the
node's own file and two of its own: one writable by others and a symlink to
a file elsewhere, each of which would run shell code and offer the attacker's
token. Meanwhile the real monitor probes on its own clock and on forced
refreshes. The descriptor the child sources is the one that was checked, so
the attacker's code never runs and the provider never sees their token,
however the swaps fall; every probe either used the node's file or was
refused as `config`.
"""
from __future__ import annotations

import os
import threading
import time

from tests.support.home import accounts_path, monitor_env, write_accounts
from tests.support.provider import ProviderServer
from tests.support.waiting import wait_until

RACE_S = 10.0
RACE_MAX_S = 120.0
GOOD = "tok-node-own"
EVIL = "tok-attacker"


class Swapper(threading.Thread):
    """Replaces `path` by rename, in turn, with the good file, an evil file others
    may write, and a symlink to an evil file; counts the swaps."""

    def __init__(self, path, good, evil_loose, evil_target) -> None:
        super().__init__(daemon=True)
        self.path, self.good, self.evil_loose, self.evil_target = path, good, evil_loose, evil_target
        self.swaps = 0
        self.stop = threading.Event()

    def _put(self, make) -> None:
        tmp = self.path.with_name(".swap-%d" % self.swaps)
        make(str(tmp))
        os.rename(str(tmp), str(self.path))
        self.swaps += 1

    def run(self) -> None:
        while not self.stop.is_set():
            self._put(lambda tmp: os.link(str(self.good), tmp))
            self._put(lambda tmp: os.link(str(self.evil_loose), tmp))
            self._put(lambda tmp: os.link(str(self.good), tmp))
            self._put(lambda tmp: os.symlink(str(self.evil_target), tmp))


def _evil_text(marker) -> str:
    return (": > '%s'\nexport MODEL_TOKEN_EVIL=%s  # evil@example.com\n"
            "export MODEL_CODE_OAUTH_TOKEN=\"$MODEL_TOKEN_EVIL\"\n" % (marker, EVIL))


def test_a_swapping_attacker_never_gets_code_run_or_a_token_used(home, tmp_path, monitors):
    config_dir = accounts_path(home).parent
    config_dir.mkdir(parents=True, mode=0o700)
    marker = tmp_path / "attacker-code-ran"
    good = write_accounts(config_dir / "good.env", [("A", GOOD, "a@example.com")], active="A")
    evil_loose = config_dir / "evil-loose.env"
    evil_loose.write_text(_evil_text(marker))
    os.chmod(str(evil_loose), 0o666)
    evil_target = tmp_path / "evil-elsewhere.env"
    evil_target.write_text(_evil_text(marker))
    os.chmod(str(evil_target), 0o600)
    os.link(str(good), str(accounts_path(home)))

    with ProviderServer() as provider:
        provider.set_account(GOOD)
        provider.set_account(EVIL)
        mon = monitors.start(monitor_env(home, provider.url, SVC_PROBE_INTERVAL_S="0.1"))
        swapper = Swapper(accounts_path(home), good, evil_loose, evil_target)
        outcomes = {"ok": 0, "config": 0}
        seen = set()
        try:
            wait_until(lambda: mon.get_json("/api/accounts")[1].get("probedAt"), message="a first probe")
            swapper.start()
            # At least RACE_S, and on until the swaps have landed on both sides of some probe (a
            # loaded machine probes less often, and about one probe in twenty meets a swapped file),
            # within a deadline.
            end, last = time.monotonic() + RACE_S, time.monotonic() + RACE_MAX_S
            while time.monotonic() < end or (min(outcomes.values()) == 0 and time.monotonic() < last):
                status, body = mon.get_json("/api/accounts?refresh=true", {"X-Svc-Refresh": "1"})
                assert status == 200
                if body["probedAt"] in seen:
                    continue
                seen.add(body["probedAt"])
                error = body.get("error")
                if error is None:
                    assert body["active"]["label"] == "a" and [a["label"] for a in body["accounts"]] == ["a"]
                    outcomes["ok"] += 1
                else:
                    assert error["kind"] == "config", body
                    outcomes["config"] += 1
        finally:
            swapper.stop.set()
            swapper.join(10)
            mon.stop()
        evil_calls = provider.message_calls(EVIL)
    print("\nswap race: %d swaps, %d probes attempted (%d used the node's file, %d refused as config), "
          "%d won by the attacker" % (swapper.swaps, len(seen), outcomes["ok"], outcomes["config"],
                                      int(marker.exists()) + evil_calls))
    assert not marker.exists(), "the attacker's shell code ran"
    assert evil_calls == 0, "the provider received the attacker's token"
    assert swapper.swaps > 100 and len(seen) >= 5
    # The race was really run: the swaps landed on both sides of some probes.
    assert outcomes["ok"] >= 1 and outcomes["config"] >= 1, outcomes


def test_a_directory_others_may_write_refuses_the_env_file_as_config(home):
    from svcposture.probe import runner as probe
    from svcposture.paths import Paths

    config_dir = accounts_path(home).parent
    config_dir.mkdir(parents=True, mode=0o700)
    write_accounts(accounts_path(home), [("A", GOOD, "a@example.com")], active="A")
    os.chmod(str(config_dir), 0o777)
    paths = Paths(home, environ={"HOME": str(home), "SVC_PROVIDER_URL": "http://127.0.0.1:9"})
    result = probe.run_headers(paths)
    assert result["error"]["kind"] == "config"
    assert "directory is not private" in result["error"]["message"]


def test_a_symlinked_or_fifo_env_file_is_refused_without_blocking(home, tmp_path):
    from svcposture.probe import runner as probe
    from svcposture.paths import Paths

    config_dir = accounts_path(home).parent
    config_dir.mkdir(parents=True, mode=0o700)
    real = write_accounts(tmp_path / "real.env", [("A", GOOD, None)], active="A")
    os.symlink(str(real), str(accounts_path(home)))
    paths = Paths(home, environ={"HOME": str(home), "SVC_PROVIDER_URL": "http://127.0.0.1:9"})
    assert probe.run_headers(paths)["error"]["message"].endswith("is a symbolic link; it is not sourced.")
    os.unlink(str(accounts_path(home)))
    os.mkfifo(str(accounts_path(home)))
    assert probe.run_headers(paths)["error"]["message"] == "The accounts env file is not a regular file."
