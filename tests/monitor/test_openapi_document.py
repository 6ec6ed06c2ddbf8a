"""The OpenAPI document as its builder makes it (monitor/openapi.py over openapi_paths and
openapi_schemas), without a socket: every provider it lists is the registry's, and the
modules that build it name no vendor. That the served document is the builder's is
tests/monitor/test_metrics_openapi.py's; that it holds real bodies, schemathesis'."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, List

from svcposture.monitor import openapi, openapi_paths, openapi_schemas
from svcposture.monitor.openapi import openapi_document
from svcposture.vendors import provider_names
from tests.support.home import REPO


def provider_lists(doc: Any) -> Iterator[List[str]]:
    """Every list of providers the document gives: `?provider=` enums and `provider` properties."""
    if isinstance(doc, dict):
        if doc.get("name") == "provider" and doc.get("in") == "query":
            yield doc["schema"]["enum"]
        for key, value in doc.items():
            if key == "provider" and isinstance(value, dict) and "enum" in value:
                yield value["enum"]
            yield from provider_lists(value)
    elif isinstance(doc, list):
        for value in doc:
            yield from provider_lists(value)


def test_every_provider_list_is_the_registrys() -> None:
    lists = list(provider_lists(openapi_document()))
    # /api/accounts and its stream (GET and HEAD), /api/advice (GET and HEAD), /api/fleet/owner (GET and HEAD),
    # trajectory and history rows, advice, the fleet owner's answer.
    assert len(lists) == 12
    assert all(names == list(provider_names()) for names in lists), lists


THIRD = r'''
import json
from svcposture.vendors import register_vendor
from tests.support.thirdvendor import VENDOR
register_vendor(VENDOR)
from svcposture.monitor.openapi import openapi_document
print(json.dumps(openapi_document()))
'''


def test_a_registered_vendor_joins_every_provider_list_and_sentence() -> None:
    done = subprocess.run([sys.executable, "-c", THIRD], cwd=str(REPO), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    doc = json.loads(done.stdout)
    lists = list(provider_lists(doc))
    names = list(provider_names()) + ["acme"]
    assert len(lists) == 12 and all(found == names for found in lists), lists
    advice = doc["paths"]["/api/advice"]["get"]
    assert advice["parameters"][0]["description"] == \
        "Whose accounts: `claude` (default), `codex`, `copilot`, `zai`, `kimi` or `acme`. Anything else: 400."
    assert advice["responses"]["400"]["description"] == \
        "`provider` is not `claude`, `codex`, `copilot`, `zai`, `kimi` or `acme`."
    accounts = doc["paths"]["/api/accounts"]["get"]
    assert "(claude, codex, copilot, zai, kimi, acme)" in accounts["responses"]["400"]["description"]
    assert "such as `codex`, `copilot`, `zai`, `kimi` or `acme`" in accounts["parameters"][-1]["description"]


def test_the_modules_that_build_it_name_no_vendor() -> None:
    for module in (openapi, openapi_paths, openapi_schemas):
        tree = ast.parse(Path(module.__file__).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value.lower() not in provider_names(), (module.__name__, node.lineno)
            if isinstance(node, ast.ImportFrom):
                assert not set(provider_names()) & set((node.module or "").split(".")), (module.__name__, node.lineno)


def test_every_reference_names_a_component() -> None:
    doc = openapi_document()
    text = json.dumps(doc)
    for kind in ("schemas", "responses"):
        prefix = '"#/components/%s/' % kind
        for part in text.split(prefix)[1:]:
            assert part.split('"', 1)[0] in doc["components"][kind]


def _wipe(value: Any) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _wipe(item)
        value.clear()
    elif isinstance(value, list):
        for item in value:
            _wipe(item)
        value.clear()


def test_the_document_is_built_anew_each_time() -> None:
    # Nothing is shared between two builds: wiping one leaves the next as it was.
    before = json.loads(json.dumps(openapi_document()))
    _wipe(openapi_document())
    assert openapi_document() == before
