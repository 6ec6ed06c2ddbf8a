"""/metrics parsed line by line as Prometheus text; /api/openapi.json, the builder's document, validated
structurally."""
from __future__ import annotations

import hashlib
import json
import re

import pytest

from svcposture.monitor.openapi import openapi_document
from tests.support.home import canary, node_env
from tests.support.monitor import SSEClient, start_monitor
from tests.support.provider import ProviderServer

TOK1 = canary("met1")
TOK2 = canary("met2")

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABELS = r'\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*)?\}'
SAMPLE_RE = re.compile(r"^(%s)(%s)? (-?[0-9.eE+-]+|NaN|[+-]Inf)$" % (_NAME, _LABELS))


def parse_metrics(text):
    """{name: {"type": ..., "help": ..., "samples": {labels: value}}}; every line must parse."""
    assert text.endswith("\n")
    families = {}
    current = None
    for line in text.rstrip("\n").split("\n"):
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert name not in families, "duplicate family %s" % name
            families[name] = current = {"help": help_text, "type": None, "samples": {}}
            current["name"] = name
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert current is not None and current["name"] == name, line
            assert kind in ("gauge", "counter", "untyped", "summary", "histogram")
            current["type"] = kind
        else:
            match = SAMPLE_RE.match(line)
            assert match, "unparseable metrics line: %r" % line
            name, labels, value = match.groups()
            assert current is not None and name == current["name"], line
            float(value)
            assert (labels or "") not in current["samples"], "duplicate series %s" % line
            current["samples"][labels or ""] = float(value)
    return families


@pytest.fixture(scope="module")
def mon(tmp_path_factory):
    with ProviderServer() as provider:
        provider.set_account(TOK1, five_hour=(0.425, "allowed"), seven_day=(0.9, "allowed_warning"),
                             reset_5h=1800000000, reset_7d=1800300000)
        provider.set_account(TOK2, five_hour=(1.07, "rejected"), status="rejected")
        home = tmp_path_factory.mktemp("met") / "home"
        home.mkdir()
        env = node_env(home, provider.url, [("ACCT1", TOK1, 'q"uote@example.com'), ("ACCT2", TOK2, None)],
                       active="ACCT1")
        m = start_monitor(env)
        yield m
        m.stop()


def test_metrics_parse_and_carry_the_posture(mon):
    mon.get("/api/accounts")
    with SSEClient(mon.port) as _sub:
        _sub.next_account()
        status, headers, body = mon.get("/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    fam = parse_metrics(body.decode("utf-8"))
    # account_key: sha256(provider NUL lower-cased email)[:16]; acct2 has no email, so no key label.
    email = [a for a in mon.get_json("/api/accounts")[1]["accounts"] if a["label"] == "acct1"][0]["email"]
    assert email
    key = hashlib.sha256(("claude\0" + email.lower()).encode()).hexdigest()[:16]
    one = 'account="acct1",provider="claude",account_key="%s"' % key
    pct = fam["svc_account_utilization_percent"]["samples"]
    assert pct['{%s,window="five_hour"}' % one] == 42.5
    assert pct['{%s,window="seven_day"}' % one] == 90.0
    assert pct['{account="acct2",provider="claude",window="five_hour"}'] == 107.0
    resets = fam["svc_account_window_resets_at_seconds"]["samples"]
    assert resets['{%s,window="five_hour"}' % one] == 1800000000
    assert resets['{%s,window="seven_day"}' % one] == 1800300000
    assert fam["svc_account_active"]["samples"] == {'{%s}' % one: 1, '{account="acct2",provider="claude"}': 0}
    account_statuses = fam["svc_account_status"]["samples"]
    assert account_statuses['{%s,status="ok"}' % one] == 1
    assert account_statuses['{account="acct2",provider="claude",status="rejected"}'] == 1
    assert sum(account_statuses.values()) == 2
    statuses = fam["svc_node_status"]["samples"]
    assert statuses['{status="ok"}'] == 1 and sum(statuses.values()) == 1
    assert fam["svc_posture_available"]["samples"][""] == 1
    assert fam["svc_probe_runs_total"]["type"] == "counter" and fam["svc_probe_runs_total"]["samples"][""] >= 1
    assert fam["svc_probe_errors_total"]["samples"][""] == 0
    assert fam["svc_probe_last_success_timestamp_seconds"]["samples"][""] > 1.7e9
    assert fam["svc_sse_subscribers"]["samples"][""] == 1
    assert fam["svc_sse_subscribers_max"]["samples"][""] == 1024
    for family in fam.values():
        assert family["type"] and family["help"]
    assert "CANARY" not in body.decode()


def test_metrics_of_a_disabled_node(tmp_path, monitors):
    from tests.support.home import clean_env
    m = monitors.start(clean_env(tmp_path), ["--no-probe"])
    fam = parse_metrics(m.get("/metrics")[2].decode())
    assert fam["svc_posture_available"]["samples"][""] == 0
    assert sum(fam["svc_node_status"]["samples"].values()) == 0
    assert fam["svc_account_utilization_percent"]["samples"] == {}
    assert fam["svc_probe_last_success_timestamp_seconds"]["samples"] == {}


# ---------------------------------------------------------------- OpenAPI

def _resolve(doc, ref):
    assert ref.startswith("#/"), ref
    node = doc
    for part in ref[2:].split("/"):
        assert part in node, "dangling $ref %s" % ref
        node = node[part]
    return node


def _walk_refs(doc, node, seen):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                seen.add(value)
                _resolve(doc, value)
            else:
                _walk_refs(doc, value, seen)
    elif isinstance(node, list):
        for value in node:
            _walk_refs(doc, value, seen)


def _validate(doc, schema, value, where="$"):
    """A small JSON-Schema subset validator: enough to hold real bodies against the document."""
    if "$ref" in schema:
        return _validate(doc, _resolve(doc, schema["$ref"]), value, where)
    if "oneOf" in schema:
        matches = 0
        for option in schema["oneOf"]:
            try:
                _validate(doc, option, value, where)
                matches += 1
            except AssertionError:
                pass
        assert matches == 1, "%s matches %d oneOf options" % (where, matches)
        return
    if "anyOf" in schema:
        problems = []
        for option in schema["anyOf"]:
            try:
                return _validate(doc, option, value, where)
            except AssertionError as exc:
                problems.append(str(exc))
        raise AssertionError("%s matches no anyOf option: %s" % (where, "; ".join(problems)))
    if "const" in schema:
        assert value == schema["const"], where
    if "enum" in schema:
        assert value in schema["enum"], "%s: %r not in enum" % (where, value)
    types = schema.get("type")
    if types is not None:
        types = types if isinstance(types, list) else [types]
        checks = {"object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
                  "string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
                  "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
                  "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                  "null": lambda v: v is None}
        assert any(checks[t](value) for t in types), "%s: %r is not %s" % (where, value, types)
    if isinstance(value, dict):
        for key in schema.get("required", []):
            assert key in value, "%s: missing %s" % (where, key)
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is False:
            extra = set(value) - set(props)
            assert not extra, "%s: unexpected %s" % (where, extra)
        for key, sub in props.items():
            if key in value:
                _validate(doc, sub, value[key], "%s.%s" % (where, key))
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _validate(doc, schema["items"], item, "%s[%d]" % (where, i))


def test_the_served_document_is_the_builders(mon):
    status, _, body = mon.get("/api/openapi.json")
    assert status == 200 and json.loads(body) == json.loads(json.dumps(openapi_document()))


def test_openapi_document_is_structurally_valid(mon):
    status, headers, body = mon.get("/api/openapi.json")
    assert status == 200 and headers["cache-control"] == "no-store"
    doc = json.loads(body)
    assert doc["openapi"].startswith("3.1.")
    assert doc["info"]["title"] and doc["info"]["version"]
    expected = {"/", "/api/accounts", "/api/accounts/stream", "/api/openapi.json", "/metrics", "/healthz",
                "/static/dashboard.css", "/static/dashboard.js",
                "/fleet", "/static/fleet.css", "/static/fleet.js", "/api/fleet", "/api/fleet/accounts", "/api/fleet/owner",
                "/api/trajectory", "/api/history", "/api/trajectory/stream",
                "/api/login", "/static/favicon.svg", "/api/advice", "/api/vendors"}
    assert set(doc["paths"]) == expected
    op_ids = set()
    for path, item in doc["paths"].items():
        assert set(item) == {"get", "head"}, path
        for method, op in item.items():
            assert op["operationId"] not in op_ids
            op_ids.add(op["operationId"])
            assert op["responses"], path
            for code, response in op["responses"].items():
                assert re.match(r"^[1-5][0-9][0-9]$", code), code
                resolved = _resolve(doc, response["$ref"]) if "$ref" in response else response
                assert resolved["description"]
            for code in ("403", "405", "414", "431"):
                assert code in op["responses"], (path, code)
    seen = set()
    _walk_refs(doc, doc, seen)
    for name in doc["components"]["schemas"]:
        assert "#/components/schemas/" + name in seen, "unused schema " + name
    for name in doc["components"]["responses"]:
        assert "#/components/responses/" + name in seen, "unused response " + name


def test_openapi_schemas_hold_real_bodies(mon, tmp_path):
    doc = json.loads(mon.get("/api/openapi.json")[2])
    schema = doc["paths"]["/api/accounts"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    _validate(doc, schema, mon.get_json("/api/accounts")[1])
    _validate(doc, schema, {"available": False, "node": "n"})
    with pytest.raises(AssertionError):
        _validate(doc, schema, {"available": False, "node": "n", "token": "x"})
    forbidden = _resolve(doc, "#/components/schemas/Forbidden")
    status, body = mon.get_json("/api/accounts?refresh=true")
    assert status == 403
    _validate(doc, forbidden, body)
    _validate(doc, _resolve(doc, "#/components/schemas/Health"), mon.get_json("/healthz")[1])
    _validate(doc, _resolve(doc, "#/components/schemas/Error"), mon.get_json("/nope")[1])
    advice = doc["paths"]["/api/advice"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    _validate(doc, advice, mon.get_json("/api/advice")[1])
    _validate(doc, advice, mon.get_json("/api/advice?provider=codex")[1])
