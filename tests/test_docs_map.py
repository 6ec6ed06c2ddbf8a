"""docs/testing.md maps every module of the package to its tests: no module left out, no test file
named there that does not exist."""
from __future__ import annotations

import re

from tests.support.home import REPO

SECTION = "## Which tests cover which module"


def _rows():
    text = (REPO / "docs" / "testing.md").read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    body = text[start:end if end != -1 else len(text)]
    return {m.group(1): re.findall(r"`((?:\w+/)?test_\w+\.py)`", m.group(2))
            for m in re.finditer(r"^\| `([\w.]+)` \| (.*) \|$", body, re.M)}


def modules():
    found = set()
    for path in (REPO / "svcposture").rglob("*.py"):
        parts = path.relative_to(REPO / "svcposture").with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        found.add(".".join(parts) or "svcposture")
    return found


def test_every_module_has_a_row_with_tests_that_exist():
    rows = _rows()
    assert modules() - set(rows) == set(), "modules without a row in docs/testing.md"
    assert set(rows) - modules() == set(), "rows for modules that no longer exist"
    for module, files in rows.items():
        assert files, module
        for name in files:
            assert (REPO / "tests" / name).is_file(), (module, name)
