"""The sage workspace kind: a semantic index of a Red Alert 3 / C&C3 (SAGE engine) mod and its SDK.

Public surface (imported lazily, so the one-shot CLI does not pay for asyncio):
`SageService` (one per opened project: background builds, watcher, snapshots), `ProjectIndexer` (the same
without an event loop), `sage_tools(service)` (the `sage_*` tool specs), `deskbridge_dirs`, and the query
modules `queries` and `forward`.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # `typing` is not loaded by a warm start
if TYPE_CHECKING:
    from typing import Any

_EXPORTS = {
    "SageService": "deskbridge.kinds.sage.service",
    "ProjectIndexer": "deskbridge.kinds.sage.indexer",
    "sage_tools": "deskbridge.kinds.sage.tools",
    "deskbridge_dirs": "deskbridge.kinds.sage.settings",
    "read_sage_config": "deskbridge.kinds.sage.settings",
    "SageIndex": "deskbridge.kinds.sage.model",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
