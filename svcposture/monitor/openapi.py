"""The monitor's OpenAPI 3.1 document, served at /api/openapi.json (docs/http-api.md).

One builder over two parts: the paths (openapi_paths: every route, its
parameters and answers) and the components (openapi_schemas: every schema and
shared response). A pure function of the package and the vendor registry,
built once per app; the app serves its bytes.
"""
from __future__ import annotations

from typing import Any, Dict

from .._version import __version__
from .openapi_paths import document_paths
from .openapi_schemas import component_responses, component_schemas


def openapi_document() -> Dict[str, Any]:
    """The OpenAPI 3.1 document of every route and schema."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "svc-monitor", "version": __version__,
                 "description": "Read-only, token-free account posture of one node."},
        "paths": document_paths(),
        "components": {"schemas": component_schemas(), "responses": component_responses()},
    }
