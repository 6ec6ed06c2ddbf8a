"""The suite itself holds on a loaded machine: no test module reads the clock when it is imported.

A value read at import is as old as the whole run by the time a test late in the run uses it, and
on a loaded machine a run takes many minutes: "an hour from now" or "a minute ago" read at import
is wrong by then. Clocks are read in the test (or in a fixture) that uses them. This walks every
module under tests/ and names each clock call that runs at import: module and class bodies,
default argument values and decorator arguments (pytest.mark.parametrize's lists are built then).
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, List

TESTS = Path(__file__).resolve().parent
CLOCKS = {("time", "time"), ("time", "monotonic"), ("time", "perf_counter"), ("time", "time_ns"),
          ("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today")}
CLOCK_FUNCTIONS = {"now_ms", "_now_ms", "monotonic", "time_ns", "utcnow"}


def _is_clock(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute):
        owner = func.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        return (name, func.attr) in CLOCKS or func.attr in ("now_ms",)
    return isinstance(func, ast.Name) and func.id in CLOCK_FUNCTIONS


def _import_time_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node evaluated when the module is imported: function and lambda bodies are skipped,
    their decorators and default values are not."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for part in child.decorator_list + child.args.defaults + [d for d in child.args.kw_defaults if d]:
                yield part
                yield from _import_time_nodes(part)
            continue
        if isinstance(child, ast.Lambda):
            for part in child.args.defaults:
                yield part
            continue
        yield child
        yield from _import_time_nodes(child)


def clock_reads_at_import(source: str) -> List[int]:
    tree = ast.parse(source)
    return sorted({n.lineno for n in _import_time_nodes(tree) if isinstance(n, ast.Call) and _is_clock(n)})


def test_the_scan_sees_every_way_a_clock_is_read_at_import():
    source = ("import time\nfrom datetime import datetime\nNOW = time.time()\nclass C:\n    AT = datetime.now()\n"
              "def f(at=time.monotonic()):\n    return time.time()\n@mark(when=now_ms())\ndef g():\n    pass\n"
              "L = lambda: time.time()\n")
    assert clock_reads_at_import(source) == [3, 5, 6, 8]


def test_no_test_module_reads_the_clock_at_import():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        for line in clock_reads_at_import(path.read_text(encoding="utf-8")):
            found.append("%s:%d" % (path.relative_to(TESTS.parent), line))
    assert found == [], "clock read at import time (read it in the test): %s" % ", ".join(found)
