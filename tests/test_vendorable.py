import shutil
import subprocess
import sys

import pytest

from conftest import REPO

CHECKER = REPO.parent / "shared" / "tools" / "check_vendorable.py"


def test_package_imports_only_stdlib_and_itself_relatively():
    assert CHECKER.is_file(), "shared/ must sit beside the repo"
    # The checker knows the stdlib from sys.stdlib_module_names (3.10+); on an
    # older interpreter let a newer python3 from PATH judge the same files.
    python = sys.executable
    if not hasattr(sys, "stdlib_module_names"):
        python = shutil.which("python3") or ""
        probe = subprocess.run([python, "-c", "import sys; sys.stdlib_module_names"], capture_output=True) \
            if python else None
        if probe is None or probe.returncode != 0:
            pytest.skip("no interpreter with sys.stdlib_module_names to run the checker")
    proc = subprocess.run([python, str(CHECKER), "svcposture"], cwd=str(REPO),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_import_does_not_pull_in_http_server():
    code = "import sys, svcposture; print('http.server' in sys.modules, 'urllib.request' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
