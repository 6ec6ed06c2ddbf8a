"""Copilot, z.ai and Kimi are each one package and one registry line (docs/vendors.md): no module outside
its package and svcposture/vendors.py names one, no vendor's package imports another's, and each stays
small, its common part being svcposture/keyvendor/."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.support.home import REPO

PACKAGE = REPO / "svcposture"
KEY_VENDORS = ("copilot", "zai", "kimi")
# What a key vendor's own package may hold, in lines: its request, parser, texts and demo part.
MAX_LINES = 400


def _names_in(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in KEY_VENDORS:
            yield node.lineno, node.value
        if isinstance(node, ast.ImportFrom):
            for part in (node.module or "").split("."):
                if part in KEY_VENDORS:
                    yield node.lineno, node.module


def test_no_module_outside_a_vendors_package_and_the_registry_names_it():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in KEY_VENDORS or relative == Path("vendors.py"):
            continue
        names = list(_names_in(path))
        if names:
            found[str(relative)] = names
    assert found == {}


def test_no_key_vendor_imports_another_vendors_package():
    for vendor in KEY_VENDORS:
        for path in (PACKAGE / vendor).glob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            modules = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
            others = [m for m in modules if set(m.split(".")) & (set(KEY_VENDORS) - {vendor} | {"claude", "codex"})]
            assert others == [], (path.name, others)


def test_each_key_vendors_package_stays_small():
    sizes = {vendor: sum(len(p.read_text(encoding="utf-8").splitlines()) for p in (PACKAGE / vendor).glob("*.py"))
             for vendor in KEY_VENDORS}
    assert all(size < MAX_LINES for size in sizes.values()), sizes


def test_the_check_sees_a_name_where_it_is(tmp_path):
    assert list(_names_in(PACKAGE / "keyvendor" / "vendor.py")) == []
    probe = tmp_path / "probe.py"
    probe.write_text('X = "Kimi"\nfrom ..zai.reply import parse_reply\n')
    assert sorted(_names_in(probe)) == [(1, "Kimi"), (2, "zai.reply")]
