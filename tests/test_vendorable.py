import os
import subprocess
import sys

import pytest

from tests.support.cli import checker_python
from tests.support.home import REPO

CHECKER = REPO.parent / "shared" / "tools" / "check_vendorable.py"


def test_package_imports_only_stdlib_and_itself_relatively():
    if not CHECKER.is_file():
        # The project's tools sit beside the repository in CI, not beside a clone made elsewhere.
        if os.environ.get("CI"):
            pytest.fail("%s missing under CI: shared/ must sit beside the repo" % CHECKER)
        pytest.skip("%s is not beside this checkout (CI has it)" % CHECKER)
    python = checker_python()
    proc = subprocess.run([python, str(CHECKER), "svcposture"], cwd=str(REPO),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_import_does_not_pull_in_http_server():
    code = "import sys, svcposture; print('http.server' in sys.modules, 'urllib.request' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
