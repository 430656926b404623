"""`lxml.etree`, imported on first use: a warm start answers from cached records and never parses XML,
so it should not pay for loading lxml (a noticeable part of a 0.1 s process)."""

from __future__ import annotations

import importlib
from typing import Any


class _LazyEtree:
    def __getattr__(self, name: str) -> Any:
        module = importlib.import_module("lxml.etree")
        return getattr(module, name)


etree: Any = _LazyEtree()
