"""The promise rejection tracker of script runs, in-process: it finds what no handler took, lets go of what a
handler took later, and stays out of an engine whose layout it does not know (the run goes on without it).
Runs through the worker: `test_script_api.py::test_a_promise_rejection_nobody_handles_fails_the_run_like_a_throw`."""

from __future__ import annotations

import ctypes
import sys

import pytest
import quickjs

from deskbridge.kinds.pvf.scripting import rejections
from deskbridge.kinds.pvf.scripting.rejections import RejectionTracker, outermost_frame


def drain(ctx: quickjs.Context) -> None:
    while ctx.execute_pending_job():
        pass


def test_the_oldest_unhandled_rejection_is_told_with_its_stack() -> None:
    ctx = quickjs.Context()
    tracker = RejectionTracker.install(ctx)
    assert tracker is not None  # this build's layout is the known one
    try:
        ctx.eval("var late = Promise.reject(new Error('late'));")
        ctx.eval("async function f() { await null; throw new RangeError('first'); } f();")
        drain(ctx)
        ctx.eval("Promise.reject('second'); late.catch(() => {});")
        drain(ctx)
        text = tracker.first_unhandled()
        assert text is not None and text.startswith("RangeError: first\n    at f (<input>:1:")
    finally:
        tracker.uninstall()


def test_nothing_is_told_when_every_rejection_found_a_handler() -> None:
    ctx = quickjs.Context()
    tracker = RejectionTracker.install(ctx)
    assert tracker is not None
    try:
        ctx.eval("(async () => { try { await Promise.reject(1); } catch (e) {} })();")
        ctx.eval("var p = Promise.reject(2); (async () => { await null; await null; p.catch(() => {}); })();")
        drain(ctx)
        assert tracker.first_unhandled() is None
    finally:
        tracker.uninstall()


@pytest.mark.parametrize(
    "unknown",
    [
        lambda mp: mp.setattr(rejections, "_CONTEXT_SIZE", 88),  # another binding's struct
        lambda mp: mp.setattr(rejections, "_CONTEXT_AT", 32),  # the context pointer elsewhere
        lambda mp: mp.setattr(RejectionTracker, "_answers_a_probe", lambda self: False),  # another ABI
    ],
)
def test_an_engine_of_another_layout_runs_without_the_tracker(monkeypatch, unknown) -> None:
    unknown(monkeypatch)
    ctx = quickjs.Context()
    assert RejectionTracker.install(ctx) is None
    ctx.eval("Promise.reject(new Error('x')); async function f() { throw 1; } f();")
    drain(ctx)  # no tracker is called (none was left installed), nothing breaks
    assert ctx.eval("1 + 1") == 2


def test_a_rejection_in_a_job_is_placed_at_the_script_function_resumed() -> None:
    stack = "Error: NOT_FOUND: no file\n    at call (<input>:58:19)\n    at lst (<input>:301:7)\n    at main (<input>:5:7)\n"
    assert outermost_frame(stack, line_offset=2) == {"line": 3, "column": 7}
    assert outermost_frame("a plain string", line_offset=2) == {}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel is asked on Linux only")
def test_a_pointer_is_asked_of_the_kernel_before_it_is_read() -> None:
    mapped = ctypes.create_string_buffer(64)
    assert rejections._readable(ctypes.addressof(mapped))
    assert not rejections._readable(8) and not rejections._readable(0x7FFF_FFFF_0000_0000)
