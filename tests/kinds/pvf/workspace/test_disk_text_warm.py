"""Warming the classic string tables after an open (search.py `DiskText.warm`) does not hold the engine lock
while it reads them — every tool call, the open's own answer included, would wait ≈ 0.8 s on classic-200k —
and a save's `reset` during the warm-up wins over the tables read before it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.search import DiskText


def _warming(archives: dict[str, Path], monkeypatch: pytest.MonkeyPatch, during) -> DiskText:
    archive = open_archive(archives["classic"])
    text = DiskText(archive, threading.RLock())
    real = text._new_strings

    def reading() -> object:
        during(text)
        return real()

    monkeypatch.setattr(text, "_new_strings", reading)
    text.warm()
    return text


def test_the_tables_are_read_without_the_engine_lock(
    archives: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[bool] = []

    def another_caller(text: DiskText) -> None:
        def call() -> None:
            got = text.lock.acquire(timeout=2)
            taken.append(got)
            if got:
                text.lock.release()

        t = threading.Thread(target=call)
        t.start()
        t.join()

    text = _warming(archives, monkeypatch, another_caller)
    assert taken == [True]
    assert text._strings is not None  # installed once read
    text.archive.close()


def test_a_reset_during_the_warm_up_discards_what_was_read_before_it(
    archives: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _warming(archives, monkeypatch, lambda t: t.reset())
    assert text._strings is None
    text.archive.close()
