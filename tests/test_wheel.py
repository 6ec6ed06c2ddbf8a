"""A built wheel installs into a clean virtual environment, and what it installs runs there (docs/testing.md).

The wheel is built from a copy of the sources (the checkout stays untouched) with this interpreter,
installed with no index into a fresh venv, and run from a directory and an environment in which
the checkout cannot be imported: only the installed copy can answer."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Dict, List

import pytest

from tests.support.home import REPO
from tests.support.waiting import wait_until

SOURCES = ("svcposture", "setup.cfg", "pyproject.toml", "README.md")
URL_RE = re.compile(r"http://127\.0\.0\.1:\d+")


def _has_build_backend() -> bool:
    try:
        import setuptools  # noqa: F401
        import wheel  # noqa: F401
    except ImportError:
        return False
    return True


def build_wheel(workdir: Path) -> Path:
    src = workdir / "src"
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(str(REPO / name), str(src / name), ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(str(REPO / name), str(src / name))
    # Without setuptools and wheel here, pip builds in isolation (fetching the backend from the index).
    isolation = ["--no-build-isolation"] if _has_build_backend() else []
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation,
                           "-w", str(workdir / "dist"), str(src)],
                          capture_output=True, text=True, timeout=600, cwd=str(workdir))
    assert done.returncode == 0, done.stdout + done.stderr
    wheels = list((workdir / "dist").glob("svcposture-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def bare_env(home: Path, venv: Path) -> Dict[str, str]:
    """No PYTHONPATH, no SVC_/MODEL_ settings; the venv's bin first on PATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not k.startswith(("SVC_", "MODEL_"))}
    env.update(HOME=str(home), PATH="%s%s%s" % (venv / "bin", os.pathsep, env.get("PATH", "/usr/bin:/bin")),
               PYTHONDONTWRITEBYTECODE="1")
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory):
    """(venv, environment, working directory) with the wheel installed and nothing else."""
    root = tmp_path_factory.mktemp("wheel")
    wheel_file = build_wheel(root)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    home = root / "home"
    home.mkdir(mode=0o700)
    env = bare_env(home, venv)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                           str(wheel_file)], capture_output=True, text=True, timeout=300, env=env, cwd=str(home))
    assert done.returncode == 0, done.stdout + done.stderr
    return venv, env, home


def run(cmd: List[str], env: Dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=str(cwd))


def test_the_venv_imports_the_installed_copy_not_the_checkout(installed) -> None:
    venv, env, home = installed
    done = run([str(venv / "bin" / "python"), "-c", "import svcposture; print(svcposture.__file__)"], env, home)
    assert done.returncode == 0, done.stderr
    where = Path(done.stdout.strip()).resolve()
    assert venv.resolve() in where.parents and REPO not in where.parents, where


@pytest.mark.parametrize("script, usage", [("svc-monitor", "usage: svc-monitor"), ("svc-cluster", "usage: svc-cluster"),
                                           ("svc-stack", "usage: svc-stack")])
def test_console_scripts_print_their_help(installed, script: str, usage: str) -> None:
    venv, env, home = installed
    done = run([str(venv / "bin" / script), "--help"], env, home)
    assert done.returncode == 0 and usage in done.stdout, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr


def test_the_demo_serves_from_the_installed_copy_and_stops_on_ctrl_c(installed) -> None:
    venv, env, home = installed
    log = home / "demo.log"
    with open(str(log), "wb") as fh:
        proc = subprocess.Popen([str(venv / "bin" / "python"), "-m", "svcposture", "monitor", "demo", "--port", "0"],
                                cwd=str(home), env=env, stdin=subprocess.DEVNULL, stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def serving() -> bool:
            assert proc.poll() is None, "the demo exited %s:\n%s" % (proc.returncode, log.read_text())
            m = URL_RE.search(log.read_text())
            if not m:
                return False
            try:
                with urllib.request.urlopen(m.group(0) + "/", timeout=5) as page:
                    return page.status == 200 and b"svc" in page.read()
            except OSError:
                return False
        wait_until(serving, timeout=60, interval=0.1, message="the installed demo's dashboard")
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "Traceback" not in log.read_text()
