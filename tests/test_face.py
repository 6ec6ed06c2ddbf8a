"""The face as callers meet it: exceptions named `svcposture.X` wherever they are
raised from, and `dir(svcposture)` that lists the API and nothing else."""
from __future__ import annotations

import importlib
import pickle
import shutil
import subprocess
import sys

import pytest

import svcposture
from tests.support.home import REPO

EXCEPTIONS = [name for name in svcposture.__all__ if name.endswith(("Error", "Setting"))]


def test_the_face_lists_seven_exceptions():
    assert sorted(EXCEPTIONS) == ["ConfigError", "CorruptFileError", "EventLogError", "HistoryError",
                                  "InvalidSetting", "LatchError", "SvcpostureError"]


@pytest.mark.parametrize("name", EXCEPTIONS)
def test_every_public_exception_reports_the_package_as_its_module(name):
    cls = getattr(svcposture, name)
    assert cls.__module__ == "svcposture"
    assert repr(cls) == "<class 'svcposture.%s'>" % name
    assert issubclass(cls, svcposture.SvcpostureError)
    if name != "CorruptFileError":  # its constructor takes a path: pickling is not its business
        copy = pickle.loads(pickle.dumps(cls("x")))
        assert type(copy) is cls and str(copy) == "x"


def test_a_traceback_names_the_exception_as_callers_catch_it(tmp_path):
    (tmp_path / "svc").mkdir()
    (tmp_path / "svc" / "history").mkdir()
    code = "import svcposture; svcposture.read_history(%r, hours=0)" % str(tmp_path)
    done = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), capture_output=True, timeout=60)
    assert done.returncode == 1
    last = done.stderr.decode().strip().splitlines()[-1]
    assert last.startswith("svcposture.InvalidSetting: "), last


def test_dir_is_exactly_all():
    assert dir(svcposture) == sorted(svcposture.__all__)
    svcposture.read_posture  # noqa: B018 (loads submodules into the package namespace)
    importlib.import_module("svcposture.trajectory.history")
    assert dir(svcposture) == sorted(svcposture.__all__)
    for name in svcposture.__all__:
        assert getattr(svcposture, name) is not None


def test_a_vendored_copy_names_its_exceptions_by_its_own_import_path(tmp_path):
    vendor = tmp_path / "hostpkg" / "_vendor"
    vendor.mkdir(parents=True)
    (tmp_path / "hostpkg" / "__init__.py").write_text("")
    (vendor / "__init__.py").write_text("")
    shutil.copytree(str(REPO / "svcposture"), str(vendor / "svcposture"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = ("import hostpkg._vendor.svcposture as s; "
            "print(s.ConfigError.__module__, s.InvalidSetting.__module__, 'svcposture' in __import__('sys').modules)")
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=str(tmp_path), capture_output=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split() == ["hostpkg._vendor.svcposture", "hostpkg._vendor.svcposture", "False"]
