"""Fuzz the files the foundation reads: config JSON, latch files, event-log bytes.

Every reader must either return a value or raise its own documented error,
never crash with anything else, and never lose the bytes it was handed: a
corrupt config file is left exactly as it was, a corrupt latch is moved aside.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcposture import config
from svcposture.events import STATUS_CHANGED, EventLog, parse_line, status_changed
from svcposture.posture.latch import Latch, _valid_latch
from svcposture.paths import Paths

FUZZ = settings(max_examples=60, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                      st.text(max_size=20))
json_value = st.recursive(json_leaf, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=8), kids, max_size=4)), max_leaves=20)

# Byte soups biased toward near-JSON: fragments of valid documents, torn and spliced.
json_fragments = st.sampled_from([
    b"{", b"}", b"[", b"]", b'"', b":", b",", b"\n", b"\\", b"null", b"true", b"1e999", b"-",
    b'"svc"', b'{"svc":{"host":{"name":"a"}}}', b'\xff', b'\xef\xbb\xbf', b"\x00", b"\xc3", b" ",
    b'{"version":1,"accounts":{}}', b'"latched":true', b'"eventId":[1]', b"NaN", b"Infinity",
])
near_json = st.one_of(
    st.binary(max_size=300),
    st.lists(json_fragments, max_size=30).map(b"".join),
    json_value.map(lambda v: json.dumps(v).encode()),
    st.tuples(json_value, st.integers(0, 200)).map(lambda t: json.dumps(t[0]).encode()[: t[1]]),
)


class _Dir:
    """A throw-away directory per example (hypothesis reruns the body many times)."""

    def __enter__(self) -> Path:
        self.path = Path(tempfile.mkdtemp(prefix="svcfuzz-"))
        return self.path

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(str(self.path), ignore_errors=True)


# ---------------------------------------------------------------- config JSON

@FUZZ
@given(raw=near_json)
def test_load_layer_returns_a_dict_or_a_config_error(raw: bytes) -> None:
    with _Dir() as d:
        path = d / "config.json"
        path.write_bytes(raw)
        try:
            data = config.load_layer(path)
        except config.ConfigError as exc:
            assert exc.path == str(path)
            assert str(path) in str(exc)
        else:
            assert isinstance(data, dict)
            assert data == json.loads(raw.decode("utf-8"))


@FUZZ
@given(raw=near_json, key=st.sampled_from(["svc.host.name", "svc.cluster.livenessAnchorIssue", "a.b.c"]),
       value=json_leaf)
def test_write_layer_never_overwrites_what_it_cannot_parse(raw: bytes, key: str, value: object) -> None:
    with _Dir() as d:
        path = d / "node.json"
        path.write_bytes(raw)
        try:
            before = config.load_layer(path)
        except config.ConfigError:
            before = None
        try:
            config.write_layer(path, {key: value})
        except config.ConfigError:
            # Refused: the file is byte for byte what it was, and no temp file is left.
            assert path.read_bytes() == raw
            assert sorted(p.name for p in d.iterdir()) == ["node.json"]
            return
        # Accepted: the old file was a valid object; the merge kept everything else.
        assert before is not None
        after = config.load_layer(path)
        assert config.get_dotted(after, key) == value
        assert os.stat(str(path)).st_mode & 0o777 == 0o600


@FUZZ
@given(updates=st.dictionaries(
    st.from_regex(r"\A[a-z]{1,4}(\.[a-z]{1,4}){0,3}\Z"), json_value, min_size=1, max_size=5))
def test_write_layer_round_trips_dotted_keys(updates: dict) -> None:
    with _Dir() as d:
        path = d / "config.json"
        try:
            config.write_layer(path, updates)
        except config.ConfigError:
            # Only a key that runs through a non-object earlier key may be refused
            # (`a` = 1 then `a.b` = 2); then nothing at all is written.
            assert not path.exists()
            return
        data = config.load_layer(path)
        # A later key may replace an earlier one's subtree; the last writer of a
        # prefix wins, exactly as a plain sequence of set_dotted calls would.
        model: dict = {}
        for key, value in updates.items():
            config.set_dotted(model, key, value)
        assert data == model


@FUZZ
@given(key=st.text(max_size=30))
def test_dotted_keys_are_validated(key: str) -> None:
    try:
        parts = config.split_key(key)
    except config.ConfigError:
        return
    assert all(parts) and ".".join(parts) == key


@FUZZ
@given(node_raw=near_json, config_raw=near_json, secrets_raw=near_json, cluster_raw=near_json)
def test_getters_on_random_layer_files(node_raw: bytes, config_raw: bytes, secrets_raw: bytes,
                                       cluster_raw: bytes) -> None:
    with _Dir() as d:
        paths = Paths(d, environ={"HOME": str(d)})
        paths.config_dir.mkdir(parents=True)
        paths.node_json.write_bytes(node_raw)
        paths.config_json.write_bytes(config_raw)
        paths.cluster_secrets.write_bytes(secrets_raw)
        for getter in (config.host_name, config.liveness_anchor, config.node_name):
            try:
                value = getter(paths)
            except config.ConfigError:
                continue
            assert value is None or (isinstance(value, str) and value.strip() == value and value)
        try:
            repo = config.cluster_repo_path(paths)
        except config.ConfigError:
            return
        if repo.is_absolute() and str(repo).startswith(str(d)):
            repo.mkdir(parents=True, exist_ok=True)
            (repo / "cluster.json").write_bytes(cluster_raw)
            try:
                names = config.roster(paths)
            except config.ConfigError:
                return
            assert all(isinstance(n, str) and n for n in names)


def test_config_hostile_sizes_and_shapes(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    cases = {
        "deep": b"[" * 200000,
        "huge": b'{"a":"' + b"x" * (5 * 1024 * 1024) + b'"}',
        "empty": b"",
        "blank": b"  \n\t ",
        "bom": b"\xef\xbb\xbf{}",
        "utf16": '{"a": 1}'.encode("utf-16"),
        "list": b"[1,2]",
        "null": b"null",
        "bigint": b'{"a": ' + b"9" * 10000 + b"}",
    }
    for label, raw in cases.items():
        path.write_bytes(raw)
        try:
            config.load_layer(path)
        except config.ConfigError as exc:
            assert str(path) in str(exc), label
        else:
            raise AssertionError("%s was accepted" % label)
        try:
            config.write_layer(path, {"svc.host.name": "x"})
        except config.ConfigError:
            pass
        else:
            raise AssertionError("%s was overwritten" % label)
        assert path.read_bytes() == raw, label
    path.unlink()
    path.mkdir()
    try:
        config.load_layer(path)
    except config.ConfigError:
        pass
    else:
        raise AssertionError("a directory was read as config")


# ---------------------------------------------------------------- latch files

def _event_line(handle: str, status: str) -> bytes:
    return json.dumps(status_changed("n1", handle, handle + "@x.test", status, "five_hour")).encode()


@FUZZ
@given(raw=near_json)
def test_latch_load_on_random_bytes(raw: bytes) -> None:
    with _Dir() as d:
        latch_path = d / "account-status-latch.json"
        latch_path.write_bytes(raw)
        log = EventLog(d / "events")
        latch = Latch(latch_path, log, "n1")
        latch.load()
        try:
            original = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):
            original = None
        if original is not None and _valid_latch(original):
            assert latch.moved_aside is None
        else:
            # Not a latch: kept next to the new file, byte for byte.
            assert latch.moved_aside is not None and latch.moved_aside.read_bytes() == raw
        data = json.loads(latch_path.read_text())
        assert _valid_latch(data)
        # The latch still works afterwards.
        ev = latch.observe("acct1", "a@x.test", "rejected", "five_hour")
        if ev is not None:
            assert latch.is_latched("acct1")


@FUZZ
@given(entries=st.dictionaries(
    st.text(min_size=1, max_size=6),
    st.fixed_dictionaries({"latched": st.booleans()}, optional={
        "eventId": json_value, "since": json_value, "bindingWindow": json_value}),
    max_size=4),
    log_lines=st.lists(st.one_of(
        st.tuples(st.sampled_from(["acct1", "acct2"]), st.sampled_from(["ok", "rejected"])).map(
            lambda t: _event_line(*t)),
        json_value.map(lambda v: json.dumps({"id": v, "attributes": {"event.name": STATUS_CHANGED}}).encode()),
        st.binary(max_size=40).filter(lambda b: b"\n" not in b)), max_size=8))
def test_latch_with_odd_but_valid_entries_and_a_noisy_log(entries: dict, log_lines: list) -> None:
    with _Dir() as d:
        latch_path = d / "account-status-latch.json"
        latch_path.write_text(json.dumps({"version": 1, "accounts": entries}))
        events = d / "events"
        events.mkdir()
        (events / "2026-11.jsonl").write_bytes(b"\n".join(log_lines))
        latch = Latch(latch_path, EventLog(events), "n1")
        latch.load()
        assert _valid_latch(json.loads(latch_path.read_text()))
        # The newest parseable edge per handle in the log decides the latch.
        newest = {}
        for raw in reversed(log_lines):
            ev = parse_line(raw)
            if ev is None or ev["attributes"].get("event.name") != STATUS_CHANGED:
                continue
            handle = ev["attributes"].get("account.handle")
            if isinstance(handle, str) and handle not in newest:
                newest[handle] = ev["attributes"].get("account.status") == "rejected"
        for handle, latched in newest.items():
            assert latch.is_latched(handle) == latched


# ---------------------------------------------------------------- event log bytes

def _valid_event(i: int) -> bytes:
    return _event_line("acct%d" % (i % 3), "rejected" if i % 2 else "ok")


log_piece = st.one_of(
    st.integers(0, 50).map(_valid_event),
    st.binary(max_size=80),
    st.tuples(st.integers(0, 50), st.integers(1, 200)).map(lambda t: _valid_event(t[0])[: t[1]]),
    json_value.map(lambda v: json.dumps(v).encode()),
    st.just(b'{"attributes": {"event.name": "account.status.changed"}}'),
)


@FUZZ
@given(pieces=st.lists(log_piece, max_size=20), sep=st.sampled_from([b"\n", b"\r\n", b"\n\n", b""]),
       block=st.sampled_from([1, 7, 64, 65536]))
def test_event_log_reader_yields_exactly_the_parseable_lines(pieces: list, sep: bytes, block: int) -> None:
    from svcposture import _files
    with _Dir() as d:
        events = d / "events"
        events.mkdir()
        raw = sep.join(pieces)
        (events / "2026-11.jsonl").write_bytes(raw)
        (events / "not-a-log.txt").write_bytes(b'{"attributes":{}}\n')
        expected = [e for e in (parse_line(p) for p in reversed(raw.split(b"\n")) if p) if e is not None]
        got = list(EventLog(events).iter_newest_first())
        assert got == expected
        assert all(isinstance(e, dict) and isinstance(e.get("attributes"), dict) for e in got)
        # The reverse reader agrees with a forward split at any block size.
        lines = list(_files.iter_lines_reverse(events / "2026-11.jsonl", block=block))
        assert lines == [p for p in reversed(raw.split(b"\n")) if p]
        newest = EventLog(events).newest(STATUS_CHANGED)
        want = next((e for e in expected if e["attributes"].get("event.name") == STATUS_CHANGED), None)
        assert newest == want


@FUZZ
@given(garbage=st.binary(max_size=200))
def test_append_after_garbage_is_the_newest_event(garbage: bytes) -> None:
    with _Dir() as d:
        log = EventLog(d / "events")
        event = status_changed("n1", "acct9", "z@x.test", "rejected", "seven_day")
        path = log.path_for(0)
        path.parent.mkdir(parents=True)
        (log.directory / log.path_for(_ts(event)).name).write_bytes(garbage)
        log.append(event)
        assert log.newest(STATUS_CHANGED) == json.loads(json.dumps(event))
        # The garbage is still there, untouched, before the sealed new line.
        data = (log.directory / log.path_for(_ts(event)).name).read_bytes()
        assert data.startswith(garbage)


def _ts(event: dict) -> int:
    from svcposture._time import parse_iso_ms
    return parse_iso_ms(event["ts"])
