"""The package runs on the standard library alone and can be vendored: checked in any clone.

Every import in `svcposture/` is either relative (the package reaching itself, so a copy under
another project's `_vendor/` imports its own modules) or a module of the standard library. And
the package's units import each other one way: counting each folder as one unit, no unit imports
one that imports it, directly or through others (docs/architecture.md draws the floors)."""
from __future__ import annotations

import ast
import os
import sys
import sysconfig
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

from tests.support.home import REPO

PACKAGE = REPO / "svcposture"


def modules() -> Iterator[Tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def imports(name: str, path: Path) -> Iterator[Tuple[int, str, int]]:
    """(level, absolute-or-relative target, line) of every import statement, at any depth."""
    tree = ast.parse(path.read_bytes(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield 0, alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                yield 0, node.module or "", node.lineno
            else:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = package[:len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                if node.module:
                    yield node.level, target, node.lineno
                else:
                    for alias in node.names:
                        yield node.level, target + "." + alias.name, node.lineno


def _stdlib_names() -> Set[str]:
    names = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
    if names - set(sys.builtin_module_names):
        return names
    # Python 3.9 has no list: what lies in the interpreter's own library directory.
    lib = Path(sysconfig.get_paths()["stdlib"])
    for entry in os.listdir(str(lib)):
        stem = entry[:-3] if entry.endswith(".py") else entry
        if stem.isidentifier() and entry != "site-packages":
            names.add(stem)
    dyn = lib / "lib-dynload"
    if dyn.is_dir():
        names.update(entry.split(".")[0] for entry in os.listdir(str(dyn)))
    return names


def test_every_import_is_relative_or_of_the_standard_library():
    stdlib = _stdlib_names()
    bad: List[str] = []
    for name, path in modules():
        for level, target, line in imports(name, path):
            top = target.split(".")[0]
            if level == 0 and (top not in stdlib or top == "svcposture"):
                bad.append("%s:%d imports %s" % (path.relative_to(REPO), line, target))
    assert not bad, "\n".join(bad)


def test_the_checker_tells_a_third_party_import_from_a_stdlib_one(tmp_path):
    stdlib = _stdlib_names()
    assert {"json", "socket", "http", "typing", "_socket", "fcntl"} <= stdlib
    assert not {"requests", "yaml", "svcposture", "pytest"} & stdlib


def unit_of(module: str, known: Set[str]) -> str:
    """The unit a module belongs to: its top-level folder, or itself for a top-level module."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 and parts[1] not in ("__init__",) else module


def unit_graph() -> Dict[str, Set[str]]:
    names = {name for name, _ in modules()}
    graph: Dict[str, Set[str]] = {}
    for name, path in modules():
        if name == "svcposture":
            continue  # the face hands names on; it imports everything and nothing imports it
        unit = unit_of(name, names)
        for level, target, _line in imports(name, path):
            if not target.startswith("svcposture."):
                continue
            while target not in names and "." in target:
                target = target.rpartition(".")[0]  # `from .x import name`: the module x
            other = unit_of(target, names)
            if other != unit and target != "svcposture":
                graph.setdefault(unit, set()).add(other)
    return graph


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one unit (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    found: List[List[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_units_import_one_way():
    graph = unit_graph()
    assert "svcposture.monitor" in graph and "svcposture.cluster" in graph  # the walk found the folders
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_loop():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
