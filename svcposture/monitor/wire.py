"""The bytes both request paths agree on: the threaded handler and the fast lane.

Request limits, the header-name grammar, status reasons and error codes, the
headers every JSON reply carries, and the one JSON serialisation. The fast
lane may only answer what the handler would answer byte for byte, so the two
take all of these from here.
"""
from __future__ import annotations

import json
import re
from typing import Any

JSON_TYPE = "application/json"
JSON_HEADERS = b"Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"

# Slowloris: a request (or the next one on a kept-alive connection) must
# arrive within this many seconds unless SVC_MONITOR_REQUEST_TIMEOUT_S says otherwise.
REQUEST_READ_TIMEOUT_S = 10.0
MAX_HEADERS = 100
MAX_HEADER_LINE = 65536
# All header fields of one request together. Bounds what a connection can
# make the monitor hold (a hundred 64 KB lines would be 6.4 MB each); browsers
# send a few KB, and a bigger block gets 431.
MAX_REQUEST_HEAD = 32 * 1024

TOKEN_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
TOKEN_BYTES_RE = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")

REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 408: "Request Timeout", 414: "URI Too Long",
           431: "Request Header Fields Too Large", 500: "Internal Server Error",
           501: "Not Implemented", 503: "Service Unavailable", 505: "HTTP Version Not Supported"}
ERROR_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed",
               408: "request_timeout", 414: "uri_too_long", 431: "header_fields_too_large",
               500: "internal", 501: "not_implemented", 503: "unavailable",
               505: "http_version_not_supported"}


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
