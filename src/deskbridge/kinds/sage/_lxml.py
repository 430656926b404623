"""`lxml.etree`, imported on first use: a warm start answers from cached records and never parses XML,
so it should not pay for loading lxml (a noticeable part of a 0.1 s process)."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # `typing` is not loaded by a warm start
if TYPE_CHECKING:
    from typing import Any


class _LazyEtree:
    def __getattr__(self, name: str) -> Any:
        # Called only for names not yet cached: the walk reads `etree.Element` for every element it
        # visits, so each attribute is looked up in the module once and then kept on this object.
        value = getattr(importlib.import_module("lxml.etree"), name)
        setattr(self, name, value)
        return value


etree: Any = _LazyEtree()


def load() -> None:
    """Import lxml now. A cold build calls this before it forks its parser and schema processes: imported
    once here, the module is shared by all of them, instead of each child importing it for itself (three
    imports of ~15 ms CPU each on a 2-core machine)."""
    etree.Element  # noqa: B018  # the attribute read is what imports it
