"""Promise rejections nobody handled in a script run, seen through QuickJS's host rejection tracker.

An `async` function that throws, or a `Promise.reject(...)`, only rejects a promise: unless something awaits
or catches it the error goes nowhere, and a run whose work stopped half-way reported "succeeded". QuickJS
tells the host about such promises through `JS_SetHostPromiseRejectionTracker` (quickjs-ng `quickjs.h`: the
tracker gets `(ctx, promise, reason, is_handled, opaque)`, once with `is_handled` false when a promise is
rejected with no handler and once more with true when a handler is added later). The Python binding does
not expose it, so it is installed here through `ctypes`, over the functions its extension module exports.

That needs the `JSRuntime*` and `JSContext*` of a `quickjs.Context`, which live in the binding's own object
struct (quickjs-ng's Python binding, `module.c`: `RuntimeData {PyObject_HEAD; JSRuntime *runtime;
JSContext *context; …}`, 80 bytes on a 64-bit build; its `quickjs.Object` is `{PyObject_HEAD; RuntimeData
*runtime_data; JSValue object}`, 40 bytes). Nothing is written unless every check of that layout agrees —
sizes, an object's pointer back to its context, both pointers readable, `JS_GetRuntime(context) == runtime`
— and a probe rejection comes back through the tracker with the value it was given. Otherwise (another
binding version, a 32-bit build where a `JSValue` is NaN-boxed, a platform whose extension exports no
symbols, no executable memory for the callback) `RejectionTracker.install` returns None and the run goes on
without it, as before.
"""

from __future__ import annotations

import ctypes
import os
import re
import secrets
import sys
from typing import Any, Final

_CONTEXT_SIZE: Final = 80
"""`sizeof(RuntimeData)` of the binding's `quickjs.Context`, in bytes, on a 64-bit build."""
_OBJECT_SIZE: Final = 40
"""`sizeof(ObjectData)` of the binding's `quickjs.Object`, in bytes."""
_RUNTIME_AT: Final = 16  # after PyObject_HEAD (ob_refcnt, ob_type)
_CONTEXT_AT: Final = 24
_BACK_POINTER_AT: Final = 16  # ObjectData.runtime_data

_TAG_OBJECT: Final = -1
_TAG_STRING: Final = -7
"""`JS_TAG_OBJECT`, `JS_TAG_STRING` (quickjs-ng `quickjs.h`)."""


class _JSValue(ctypes.Structure):
    # Not NaN-boxed on 64-bit builds (quickjs.h: `JS_NAN_BOXING` only where pointers are 32 bits):
    # a union of 8 bytes, then an int64 tag.
    _fields_ = [("u", ctypes.c_uint64), ("tag", ctypes.c_int64)]


_TRACKER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, _JSValue, _JSValue, ctypes.c_bool, ctypes.c_void_p)

_FRAME = re.compile(r"\(<input>:(\d+):(\d+)\)")


def _library(quickjs_module: Any) -> ctypes.CDLL:
    lib = ctypes.CDLL(quickjs_module.__file__)
    vp, val = ctypes.c_void_p, _JSValue
    for name, restype, argtypes in (
        ("JS_GetRuntime", vp, [vp]),
        ("JS_SetHostPromiseRejectionTracker", None, [vp, _TRACKER, vp]),
        ("JS_DupValue", val, [vp, val]),
        ("JS_FreeValue", None, [vp, val]),
        ("JS_ToCStringLen2", vp, [vp, ctypes.POINTER(ctypes.c_size_t), val, ctypes.c_bool]),
        ("JS_FreeCString", None, [vp, vp]),
        ("JS_GetPropertyStr", val, [vp, val, ctypes.c_char_p]),
        ("JS_GetException", val, [vp]),
    ):
        fn = getattr(lib, name)  # AttributeError: not exported by this build
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def _pointer_at(address: int) -> int:
    return ctypes.c_void_p.from_address(address).value or 0


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _readable(address: int, size: int = 64) -> bool:
    """Whether `size` bytes at `address` can be read, asked of the kernel instead of read (a wrong pointer
    would kill the worker): `process_vm_readv` on our own process answers EFAULT for an unmapped address
    (man 2 process_vm_readv). Elsewhere than Linux the layout checks alone decide."""
    if not sys.platform.startswith("linux"):
        return True
    libc = ctypes.CDLL(None, use_errno=True)
    read = libc.process_vm_readv
    read.restype = ctypes.c_ssize_t
    read.argtypes = [
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_ulong,
        ctypes.c_void_p,
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    buf = ctypes.create_string_buffer(size)
    local, remote = _IoVec(ctypes.addressof(buf), size), _IoVec(address, size)
    return read(os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) == size


class RejectionTracker:
    """The promises of one context rejected with no handler yet, in the order they were rejected."""

    def __init__(self, ctx: Any, lib: ctypes.CDLL, runtime: int, context: int) -> None:
        self._ctx = ctx  # the binding's object: the engine must outlive the values held here
        self._lib = lib
        self._runtime = runtime
        self._context = context
        # promise address → (promise, reason), each held (dup'd), in the order they were rejected
        self._pending: dict[int, tuple[_JSValue, _JSValue]] = {}
        self._callback = _TRACKER(self._track)  # kept: QuickJS holds only its address

    @classmethod
    def install(cls, ctx: Any) -> RejectionTracker | None:
        """Track `ctx`'s unhandled rejections, or None where the binding's layout is not the one known."""
        try:
            return cls._install(ctx)
        except Exception:  # an unknown build: run as before, without the check
            return None

    @classmethod
    def _install(cls, ctx: Any) -> RejectionTracker | None:
        import _quickjs

        if ctypes.sizeof(ctypes.c_void_p) != 8 or sys.implementation.name != "cpython":
            return None
        if type(ctx) is not _quickjs.Context or _quickjs.Context.__basicsize__ != _CONTEXT_SIZE:
            return None
        if _quickjs.Object.__basicsize__ != _OBJECT_SIZE:
            return None
        probe = ctx.eval("({})")
        if type(probe) is not _quickjs.Object or _pointer_at(id(probe) + _BACK_POINTER_AT) != id(ctx):
            return None
        runtime, context = _pointer_at(id(ctx) + _RUNTIME_AT), _pointer_at(id(ctx) + _CONTEXT_AT)
        if not runtime or not context or runtime == context or (runtime | context) % 8:
            return None
        if not (_readable(runtime) and _readable(context)):
            return None
        lib = _library(_quickjs)
        if lib.JS_GetRuntime(context) != runtime:
            return None
        tracker = cls(ctx, lib, runtime, context)
        lib.JS_SetHostPromiseRejectionTracker(runtime, tracker._callback, None)
        if not tracker._answers_a_probe():
            tracker.uninstall()
            return None
        return tracker

    def _answers_a_probe(self) -> bool:
        """A rejection made here comes back as pending with its string, and leaves once it is caught."""
        word = "probe-" + secrets.token_hex(8)
        self._ctx.set("__rejectionProbe", word)
        self._ctx.eval("globalThis.__rejectionProbe = Promise.reject(globalThis.__rejectionProbe); undefined")
        held = list(self._pending.values())
        ok = len(held) == 1 and held[0][1].tag == _TAG_STRING and self._text(held[0][1]) == word
        self._ctx.eval("globalThis.__rejectionProbe.catch(() => {}); delete globalThis.__rejectionProbe")
        while self._ctx.execute_pending_job():
            pass
        ok = ok and not self._pending
        self.release()
        return ok

    def _track(self, _ctx: int, promise: _JSValue, reason: _JSValue, handled: bool, _opaque: int) -> None:
        # Called by QuickJS inside the engine; it must not raise (ctypes would only print the error).
        try:
            if handled:
                held = self._pending.pop(promise.u, None)
                if held is not None:
                    self._free(*held)
            elif promise.u not in self._pending:
                # The promise is held too, so its address names it until it is handled or released.
                lib, c = self._lib, self._context
                self._pending[promise.u] = (lib.JS_DupValue(c, promise), lib.JS_DupValue(c, reason))
        except Exception:
            pass

    def first_unhandled(self) -> str | None:
        """The oldest rejection still unhandled, as the binding shows a thrown error (its `toString`, then
        its stack); None when there is none."""
        if not self._pending:
            return None
        _promise, reason = next(iter(self._pending.values()))
        text = self._text(reason) or "a promise was rejected with a value that cannot be shown"
        if reason.tag == _TAG_OBJECT:
            stack = self._lib.JS_GetPropertyStr(self._context, reason, b"stack")
            shown = self._text(stack) if stack.tag == _TAG_STRING else None
            self._lib.JS_FreeValue(self._context, stack)
            if shown:
                text += "\n" + shown
        return text

    def _text(self, value: _JSValue) -> str | None:
        size = ctypes.c_size_t(0)
        raw = self._lib.JS_ToCStringLen2(self._context, ctypes.byref(size), value, False)
        if not raw:  # its toString threw: clear that exception
            self._lib.JS_FreeValue(self._context, self._lib.JS_GetException(self._context))
            return None
        try:
            return ctypes.string_at(raw, size.value).decode("utf-8", "replace")
        finally:
            self._lib.JS_FreeCString(self._context, raw)

    def _free(self, promise: _JSValue, reason: _JSValue) -> None:
        self._lib.JS_FreeValue(self._context, promise)
        self._lib.JS_FreeValue(self._context, reason)

    def release(self) -> None:
        """Let go of every value held (the engine must not find them still referenced when it is freed)."""
        while self._pending:
            self._free(*self._pending.popitem()[1])

    def uninstall(self) -> None:
        self.release()
        self._lib.JS_SetHostPromiseRejectionTracker(self._runtime, _TRACKER(), None)


def outermost_frame(text: str, line_offset: int) -> dict[str, int]:
    """The script's line and column in a rejection's stack that has no frame of the script's body (it was
    rejected in a job, after an `await`): its outermost frame is the script function that was resumed
    (the prelude has no async code of its own, so none of its frames is outermost)."""
    frames = _FRAME.findall(text)
    if not frames:
        return {}
    line, column = frames[-1]
    return {"line": max(1, int(line) - line_offset), "column": int(column)}
