"""Nothing outside a vendor's package and the registry names a vendor (docs/vendors.md).

A vendor is one package: everything else loops over `vendors.registered()`. So
no module outside `svcposture/<vendor>/` and `svcposture/vendors.py` imports a
vendor package or holds a vendor's name as a string literal, and the pages'
HTML and scripts, which take the vendor list and display names from
`/api/vendors`, hold no vendor name at all.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import List

from tests.support.home import REPO

PACKAGE = REPO / "svcposture"
# The registry's built-in vendors, by package directory; vendors.py is the registry itself.
VENDOR_PACKAGES = ("claude", "codex", "copilot", "zai", "kimi")


def _vendor_names() -> List[str]:
    return [name for name in VENDOR_PACKAGES if (PACKAGE / name).is_dir()]


def _owned(path: Path) -> bool:
    rel = path.relative_to(PACKAGE).parts
    return rel[0] in VENDOR_PACKAGES or rel == ("vendors.py",)


def _python_findings(path: Path, names: List[str]) -> List[str]:
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pattern = re.compile(r"(^|\.)(%s)(\.|$)" % "|".join(names))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and pattern.search(node.module):
            found.append("%s:%d imports %s" % (path, node.lineno, node.module))
        if isinstance(node, ast.ImportFrom) and node.level and not node.module:
            found += ["%s:%d imports %s" % (path, node.lineno, a.name) for a in node.names if a.name in names]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in names:
            found.append("%s:%d names %r" % (path, node.lineno, node.value))
    return found


def test_no_module_outside_a_vendor_package_and_the_registry_names_a_vendor() -> None:
    names = _vendor_names()
    found = [f for path in sorted(PACKAGE.rglob("*.py")) if not _owned(path) for f in _python_findings(path, names)]
    assert found == []


def test_the_pages_name_no_vendor() -> None:
    words = re.compile(r"\b(%s)\b" % "|".join(_vendor_names() + ["claude code"]), re.I)
    found = []
    for path in sorted((PACKAGE / "monitor" / "static").iterdir()):
        if path.suffix not in (".html", ".js", ".css"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if words.search(line):
                found.append("%s:%d: %s" % (path.name, number, line.strip()[:100]))
    assert found == []


def test_the_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('from .claude import vendor\nfrom ..codex.usage import x\nfrom . import claude\n'
                      'NAME = "codex"\nOTHER = "Claude Code login"\n')
    assert len(_python_findings(sample, ["claude", "codex"])) == 4
