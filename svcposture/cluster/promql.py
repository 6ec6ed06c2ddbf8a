"""PromQL text: label values written into a query so that the engine reads back exactly them.

Every value a fleet read writes into a query (an account label, a node name)
comes from a reply, so from whatever the hosts export. Written as it is, one
quote, backslash or newline in one host's label makes the engine refuse the
whole query, and nobody's row can be read. So each value is escaped: as a
PromQL string (`promql_string`), and inside a regex first as RE2 wants it
(`node_pattern`).

PromQL reads a double-quoted string as Go does (strconv.Unquote, in Prometheus
and VictoriaMetrics alike): a backslash escapes the quote, the backslash, `n`,
`r`, `t` and `uXXXX`; anything else that is valid UTF-8 stands for itself,
except a raw newline, which ends the query with an error.
"""
from __future__ import annotations

from typing import Any, Dict, Sequence

_SHORT = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# RE2 reads a backslash before ASCII punctuation as that character itself: these are the marks
# that mean something else unescaped, outside a class and in one.
_REGEX_SPECIAL = frozenset("\\.+*?()|[]{}^$")
_CLASS_SPECIAL = frozenset("\\[]^-")


def _needs_escape(char: str) -> bool:
    return char in _SHORT or ord(char) < 0x20 or 0x7f <= ord(char) <= 0x9f


def promql_string(value: str) -> str:
    """`value` as the inside of a double-quoted PromQL string. A control character (C0, DEL, C1)
    is written `\\uXXXX`: raw, some engines take it and some do not. ValueError for a lone
    surrogate, which no engine can read (it is not UTF-8)."""
    if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise ValueError("a lone surrogate cannot be written into a PromQL string")
    if not any(_needs_escape(c) for c in value):
        return value
    return "".join(_SHORT.get(c) or ("\\u%04x" % ord(c) if _needs_escape(c) else c) for c in value)


def node_pattern(names: Sequence[str]) -> str:
    """A PromQL regex, as the inside of a PromQL string, matching exactly `names`, each shared
    prefix written once. A fleet's names share most of their letters (`host-00417`), and the
    filter has to be written twice in one query under the engine's length limit: 979 such names
    take 1,439 characters instead of 10,768. Any character is escaped for RE2, then the regex
    for the string."""
    trie: Dict[str, Any] = {}
    for name in names:
        node = trie
        for char in name:
            node = node.setdefault(char, {})
        node[""] = {}
    return promql_string(_pattern_of(trie))


def _pattern_of(node: Dict[str, Any]) -> str:
    leaves = [c for c in sorted(node) if c and list(node[c]) == [""]]
    parts = [_escaped(c) + _pattern_of(node[c]) for c in sorted(node) if c and c not in leaves]
    if len(leaves) > 1:
        parts.insert(0, "[%s]" % "".join(_in_class(c) for c in leaves))
    elif leaves:
        parts.insert(0, _escaped(leaves[0]))
    if not parts:
        return ""
    body = parts[0] if len(parts) == 1 else "(?:%s)" % "|".join(parts)
    if "" in node:  # a name ends here and others go on
        body = body + "?" if len(body) == 1 else "(?:%s)?" % body
    return body


def _escaped(char: str) -> str:
    return "\\" + char if char in _REGEX_SPECIAL else char


def _in_class(char: str) -> str:
    return "\\" + char if char in _CLASS_SPECIAL else char
