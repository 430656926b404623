"""The host side of the script API inside the worker: the archive (read-only), the run's transaction, handles.

Every operation of `prelude.js` arrives here as `(op, JSON arguments)` and is looked up in a fixed table
(`Host.ops`); arguments are checked for type, never trusted. Writes go to the run's transaction (`Tx`): the
script reads its own writes, the archive object is never written. Each changed file is sent to the parent
as text (scripts, lists, text files) or bytes (copies of binary files), without a diff — a stored file when
the script writes it (`_send_early`), again at the end only if it changed since, the rest at the end; the
parent compiles and registers the plan (`runner.py`).
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import gc
import json
import math
import os
import posixpath
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.base import ArchiveBase, norm_path
from deskbridge.kinds.pvf.paths import check_archive_path
from deskbridge.kinds.pvf.script import classic_codec
from deskbridge.kinds.pvf.script.text import Kind, int_token, lex, string_token
from deskbridge.kinds.pvf.scripting import lazy, lazy_nkpi, model
from deskbridge.kinds.pvf.scripting.rejections import RejectionTracker, outermost_frame
from deskbridge.kinds.pvf.scripting.worker import (
    CHANGE_FRAME_MAX,
    LOG_MAX_BYTES,
    LOG_MAX_LINES,
    Pipe,
    ScriptError,
    glob_regex,
    js_error,
)

PRELUDE = (Path(__file__).with_name("prelude.js")).read_text(encoding="utf-8")
DELETED = None
TYPE_BINARY, TYPE_SCRIPT, TYPE_UNICODE = 0, 1, 3
FILESET_MAX = 100_000
DOCS_LIVE = 4096
AHEAD = 256
"""Classic payloads decrypted in one pass ahead of a script's visit (`Host._payload`)."""
_LINK = re.compile(r"^<\s*(\d+)\s*::\s*([^<>`]+?)\s*(?:`[^`]*`)?>$")
_CODE = re.compile(r"^(?:Error: )?([A-Z][A-Z_]+): ")
_CONTROL = re.compile(r"[\x00-\x1f]")
_ODD_PARTS = (
    "//",
    "\x7f/",
    "/\x7f",
    "\x7f\x7f",
    "/./",
    "\x7f./",
    "/.\x7f",
    "/../",
    "\x7f../",
    "/..\x7f",
    "\x7f.\x7f",
    "\x7f..\x7f",
)


def _plain_keys(keys: list[str]) -> bool:
    """True when `Host._key` accepts every one of these keys as it is — no control character, no empty,
    `.` or `..` part, none blank or longer than 1,024 — checked over all of them at once (False may also
    mean "not sure": the caller then resolves each path as given)."""
    joined = "\x7f" + "\x7f".join(keys) + "\x7f"
    if _CONTROL.search(joined) or any(odd in joined for odd in _ODD_PARTS):
        return False
    return max(map(len, keys)) <= 1024 and all([k.strip() for k in keys])


_PRIMITIVE = (str, int, float)
_PRIMITIVE_TYPES = frozenset({str, int, float, bool, type(None)})


def _arg(args: list[Any], i: int, kind: type | tuple[type, ...], what: str) -> Any:
    v = args[i] if i < len(args) else None
    if not isinstance(v, kind) or (isinstance(v, bool) and kind is not bool):
        raise ScriptError("INVALID_ARGUMENT", f"{what} has the wrong type")
    return v


def _raiser(exc: Exception) -> Any:
    def fn(args: list[Any]) -> Any:
        raise exc

    return fn


def _utf8(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _lowered(stored: Any) -> bool:
    """True when each key of the archive's key → path map is its path in lower case and no path has a `\\`
    or a leading `/` (so `norm_path(path) == key` and the shown path is the path): checked in bulk."""
    if not isinstance(stored, dict):
        return False
    paths = "\n".join(stored.values())
    if "\\" in paths or paths.startswith("/") or "\n/" in paths:
        return False
    return paths.lower().split("\n") == list(stored)


def _suffix(key: str) -> str:
    """`posixpath.splitext(key)[1]` without its general path handling: the last `.` of the last part, where
    something other than dots comes before it in that part."""
    dot = key.rfind(".")
    if dot < 0:
        return ""
    start = key.rfind("/") + 1
    if dot < start or not key[start:dot].strip("."):
        return ""
    return key[dot:]


def _index(v: Any, what: str = "index") -> int:
    if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v) or v < 0:
        raise ScriptError("INVALID_ARGUMENT", f"{what} must be a whole number ≥ 0")
    return int(v)


class Host:
    def __init__(self, job: dict[str, Any], pipe: Pipe) -> None:
        t0 = time.perf_counter()
        self.job = job
        self.pipe = pipe
        opts = job.get("options") or {}
        self.ar = open_archive(Path(job["path"]), encoding=opts.get("encoding"), keys=opts.get("keys"))
        detected = job.get("detected_encoding")
        adopt = getattr(self.ar, "adopt_detected_encoding", None)
        if isinstance(detected, str) and adopt is not None:
            adopt(detected)  # the parent's detection on these bytes (an encoding chosen at open stays)
        if job.get("pool_tail"):
            self.ar.pools.append_raw(*job["pool_tail"])  # type: ignore[attr-defined]
        for name, value in (job.get("overlay") or {}).items():
            self.ar.stage(name, value)
        _ = self.ar.encoding
        self.family = self.ar.family
        # Every path of the workspace as the person sees it (archive minus deletions plus additions).
        self.base: dict[str, str] = {}
        # Keyed by the archive's own key strings where they are the same text (200,000 paths: ≈ 20 MB less
        # in a memory-capped worker than a second copy of every key).
        stored = self.ar._original_keys() if isinstance(self.ar, ArchiveBase) else None
        if stored is not None and _lowered(stored):
            # every key is `norm_path` of its path and every path is its own shown form: the mapping itself
            self.base = dict(stored)
        else:
            items = stored.items() if stored is not None else ((norm_path(p), p) for p in self.ar.paths())
            for k, p in items:
                nk = norm_path(p)
                self.base[k if nk == k else nk] = p.replace("\\", "/").lstrip("/")
        for name, value in (job.get("overlay") or {}).items():
            k = norm_path(name)
            if value is None:
                self.base.pop(k, None)
            else:
                self.base.setdefault(k, name.replace("\\", "/").lstrip("/"))
        self.order = list(self.base)
        self.staged_keys = {norm_path(name) for name in job.get("overlay") or {}}
        self.docs_live = int(job.get("docs_live", DOCS_LIVE))
        self.parsed = 0
        """Documents parsed so far: a document's id is its parse number, and it is live while it is one of the
        last `docs_live` parsed (`_live`), whether or not it was built."""
        self.pending: dict[int, str] = {}
        """Parse number → key of a document answered without being built (`fast_parse`: a file the batch
        prefilter found without the section asked for); built on its first use (`_doc`)."""
        self.lacking: tuple[str | None, set[str]] = (None, set())
        """(section name, the keys read ahead whose documents certainly lack it: `_lacking`)."""
        self.doc_key: dict[int, str] = {}
        self._suffix_type: dict[str, int] = {}
        self.tx: dict[str, tuple[str, Any]] = {}
        """key → (display path, text str | raw bytes | DELETED): the run's writes."""
        self.sent: dict[str, dict[str, Any]] = {}
        """key → the change frame sent for it while the script ran (`_send_early`)."""
        self.created: set[str] = set()
        self.scanned: set[str] = set()
        self.docs: dict[int, model.Document] = {}
        self.doc_path: dict[int, str] = {}
        self.secs: dict[int, model.Section] = {}
        self.sec_ids: dict[int, int] = {}
        self.sec_doc: dict[int, int] = {}
        self.doc_secs: dict[int, list[int]] = {}
        self.doc_of_key: dict[str, list[int]] = {}
        self.path_warnings: dict[str, list[str]] = {}
        self.positions: dict[str, int] | None = None
        self._next = 1
        self.filesets: dict[str, list[str]] = {k: list(v) for k, v in (job.get("filesets") or {}).items()}
        self.fileset_changed: set[str] = set()
        self.log_bytes = 0
        self.log_lines = 0
        self.pending_logs: list[dict[str, Any]] = []
        self.last_flush = time.monotonic()
        self.lists: dict[str, Any] = {}
        self._created_type: dict[str, int] = {}
        self.list_created: dict[str, set[str]] = {}
        self.str_requires: dict[str, set[str]] = {}
        """File key → the `.str` files (shown paths) whose new entries its type-8 references point at."""
        self.new_strs: dict[tuple[int, str], str] = {}
        """`.str` entries this run registered: (table id, key) → text (so links to them resolve in the run)."""
        self._nstring: list[tuple[int, str]] | None = None
        self.visit: dict[str, int] = {}
        """Key → position in the last list of files `pvf.files()` / `pvf.glob()` returned (the order a
        script most likely visits them in: classic payloads are decrypted a batch ahead, `_payload`)."""
        self.visit_keys: list[str] = []
        self.visit_gen = 0
        self.listings = 0
        """The number of the last listing: a file object of that listing names its file by (number, position)
        to the primitive `file.parse` (`fast_parse`), which then skips resolving its path (-1: it may not)."""
        self.ahead: dict[str, tuple[bytes, int]] = {}
        """Key → (payload, its position in `ahead_batch`): the payloads read ahead and not parsed yet."""
        self.ahead_batch: tuple[list[str], lazy.BatchTags | None] = ([], None)
        """The keys of the batch last read ahead and their type-5 records (`lazy.BatchTags`)."""
        self.nonce = "pvfjs-error:" + os.urandom(16).hex()
        """What the primitive bridge returns for an error (then `fast.error` tells which): a random string no
        archive value can equal by chance and the script cannot see (the prelude keeps it in its closure)."""
        self.fast_error: dict[str, str] = {"code": "INTERNAL", "message": "no error"}
        self.timings: dict[str, float] = {"open": time.perf_counter() - t0}
        """Seconds per phase of the worker (open, script, finish): reported with the run's summary."""
        self.fast_ops = {
            "file.parse": self.fast_parse,
            "file.write": self.fast_write,
            "doc.sections": self.fast_sections,
            "sec.get": self.fast_sec_get,
            "sec.set": self.fast_sec_set,
            "progress": self.progress,
        }
        self.ops = {
            "fast.error": self.last_fast_error,
            "pvf.files": lambda args: self.listing(self.files(args)),
            "pvf.find": self.find,
            "pvf.glob": lambda args: self.listing(self.glob(args)),
            "pvf.createFile": self.create_file,
            "pvf.copyFile": self.copy_file,
            "pvf.deleteFile": self.delete_file,
            "pvf.lst": self.lst,
            "pvf.getOriStrValue": self.ori_str,
            "pvf.counts": self.counts,
            "file.info": self.file_info,
            "file.text": self.file_text,
            "file.setText": self.file_set_text,
            "file.parse": self.file_parse,
            "file.write": self.file_write,
            "doc.sections": self.doc_sections,
            "doc.section": self.doc_section,
            "doc.get": self.doc_get,
            "doc.set": self.doc_set,
            "doc.delete": self.doc_delete,
            "doc.appendSection": self.doc_append,
            "doc.warnings": self.doc_warnings,
            "sec.info": self.sec_info,
            "sec.values": self.sec_values,
            "sec.children": self.sec_children,
            "sec.removeChildren": self.sec_remove_children,
            "sec.get": self.sec_get,
            "sec.set": self.sec_set,
            "sec.setValues": self.sec_set_values,
            "sec.append": self.sec_append,
            "sec.appendSection": self.sec_append_section,
            "sec.delete": self.sec_delete,
            "lst.entries": self.lst_entries,
            "lst.set": self.lst_set,
            "lst.unset": self.lst_unset,
            "lst.getId": self.lst_get_id,
            "fs.find": self.fs_find,
            "fs.create": self.fs_create,
            "fs.get": self.fs_get,
            "fs.set": self.fs_set,
            "log": self.log,
            "progress": self.progress,
        }

    # ------------------------------------------------------------------------------------------ bridge

    def _call(self, fn: Any, args: list[Any]) -> tuple[bool, Any]:
        """(True, result) or (False, {code, message}); never raises (a Python exception would corrupt the
        engine state)."""
        try:
            if self.fatal is not None:
                raise self.fatal
            return True, fn(args)
        except ScriptError as exc:
            if exc.code == "LIMIT_EXCEEDED":
                self.stop(exc)
            return False, {"code": exc.code, "message": str(exc)}
        except BridgeError as exc:
            return False, {"code": exc.code.value, "message": exc.message}
        except RecursionError:
            return False, {"code": "LIMIT_EXCEEDED", "message": "nesting too deep"}
        except MemoryError:
            self.stop(ScriptError("LIMIT_EXCEEDED", "the worker ran out of memory"))
            return False, {"code": "LIMIT_EXCEEDED", "message": "out of memory"}
        except Exception as exc:
            return False, {"code": "INTERNAL", "message": f"{type(exc).__name__}: {exc}"}

    def bridge(self, op: Any, raw: Any) -> str:
        """The JSON host function: any operation, arguments and result as JSON. Never raises."""
        try:
            fn = self.ops.get(op) if isinstance(op, str) else None
            if fn is None or not isinstance(raw, str) or len(raw) > 64 << 20:
                raise ScriptError("INVALID_ARGUMENT", f"no host operation {op!r}")
            args = json.loads(raw)
            if not isinstance(args, list):
                raise ScriptError("INVALID_ARGUMENT", "host arguments must be an array")
        except Exception as exc:
            ok, v = self._call(_raiser(exc), [])
        else:
            ok, v = self._call(fn, args)
        try:
            return json.dumps({"v": v} if ok else {"e": v}, ensure_ascii=False)
        except MemoryError:
            self.stop(ScriptError("LIMIT_EXCEEDED", "the worker ran out of memory"))
            return json.dumps({"e": {"code": "LIMIT_EXCEEDED", "message": "out of memory"}})
        except Exception as exc:
            return json.dumps({"e": {"code": "INTERNAL", "message": f"{type(exc).__name__}: {exc}"}})

    def fast(self, op: Any, a: Any, b: Any, c: Any, d: Any) -> Any:
        """The primitive host function of the hot operations (`fast_ops`): arguments and result are strings,
        numbers or null, so a call costs no JSON on either side (≈ 10× cheaper per call). An error returns
        `nonce`; the prelude then asks `fast.error` over the JSON bridge and throws it. Never raises."""
        args = [a, b, c, d]
        fn = self.fast_ops.get(op) if type(op) is str else None
        prim = _PRIMITIVE_TYPES  # the binding hands over exactly these types for JavaScript primitives
        exact = type(a) in prim and type(b) in prim and type(c) in prim and type(d) in prim
        if fn is None or (not exact and not all([v is None or isinstance(v, _PRIMITIVE) for v in args])):
            fn = _raiser(ScriptError("INVALID_ARGUMENT", f"no primitive host operation {op!r}"))
        ok, v = self._call(fn, args)
        if ok:
            if isinstance(v, str) and not v.isascii() and not _utf8(v):
                return self.nonce + ":json"  # the binding cannot hand a lone surrogate over: ask by JSON
            return v
        self.fast_error = v
        return self.nonce

    def last_fast_error(self, args: list[Any]) -> dict[str, str]:
        return self.fast_error

    # The primitive forms of the hot operations: the same methods as the JSON ones, results as primitives.

    def fast_parse(self, args: list[Any]) -> int | str:
        """`file.parse(path)`; `args[1:3]` = (listing number, position) of a file object of a listing: the
        key is taken from `visit_keys` when that listing is the last and its shown path is `path` (so the
        same key `_need(path)` resolves), unless the run wrote the file. `args[3]`: the section path the
        script last asked `sections` for; the answer is the negative id when the new document certainly has
        no such section (the prelude then answers `sections(name)` itself), else "id:" + what
        `fast_sections` answers for that path (the prelude answers `sections(name)` with it while nothing
        changed since). Such a document is not built
        here (`pending`): a file the batch prefilter found without a tag record of `name` (`_lacking`) costs
        a few dictionary operations, and is built from its stored payload only if the script uses it."""
        path, gen, i, name = args
        keys = self.visit_keys
        if gen == self.visit_gen and gen is not None and gen > 0 and type(i) is int and 0 <= i < len(keys):
            key = keys[i]
            if key not in self.tx and self.base[key] == path:
                if type(name) is str:
                    lacking = self.lacking
                    if key not in self.ahead:
                        self._read_ahead(key)
                        lacking = self.lacking
                    if lacking[0] != name:
                        lacking = self._lacking(name)
                    if key in lacking[1]:
                        self.ahead.pop(key, None)
                        self.scanned.add(key)
                        n = self.parsed = self.parsed + 1
                        self.pending[n] = key
                        if len(self.docs) + len(self.pending) > self.docs_live + self._slack:
                            self._evict()
                        return -n
                doc = self._parse(key)
                lacks = isinstance(name, str) and isinstance(doc, model.LazyDocument) and doc.lacks(name)
                did = self._register(key, doc)
                if lacks:
                    return -did
                if type(name) is str:
                    # The script asks each document for `name` next: the answer now saves it a host call
                    # (the prelude uses it while nothing changed since; an error is left for that call).
                    try:
                        return f"{did}:{self._sections_answer(did, doc, name)}"
                    except (BridgeError, ScriptError):
                        pass
                return did
        return self.file_parse(args[:1])

    @property
    def _slack(self) -> int:
        """Documents past `docs_live` kept until the next eviction (evicted in bulk: one pass per this many)."""
        return max(16, self.docs_live // 4)

    def _lacking(self, name: str) -> tuple[str | None, set[str]]:
        """The keys read ahead (`ahead`) whose documents would be lazy classic documents without a tag record
        that reads `[name]` — exactly those `_parse` + `LazyDocument.lacks(name)` answer True for: a stored
        classic script (by its name's kind), a whole-record payload within the decode budget
        (`lazy.classic_document`), none of whose type-5 records (`lazy.batch_tags`) is such a tag."""
        out: set[str] = set()
        self.lacking = (name, out)
        if self.family != "classic" or not self.ahead:
            return self.lacking
        want = model.one_part(name)
        strings = self.ar.strings
        patterns = lazy._tag_patterns(strings.table, want) if want is not None else None
        max_chars = getattr(strings.table, "max_chars", None)
        if patterns is None or max_chars is None:
            return self.lacking
        keys, batch = self.ahead_batch
        if batch is None:
            return self.lacking
        per_record = max_chars()
        tx, staged, ahead = self.tx, self.staged_keys, self.ahead
        sizes = batch.sizes
        whole = (sizes >= 2) & ((sizes - 2) % 5 == 0) & (sizes <= classic_codec.MAX_SCRIPT_BYTES)
        for i in np.flatnonzero(batch.without(lazy._pattern_indexes(patterns)) & whole).tolist():
            key = keys[i]
            got = ahead.get(key)
            if got is None:
                continue
            data = got[0]
            size = len(data)
            if (
                data[:2] == classic_codec.MAGIC
                and (size - 2) // 5 * per_record <= lazy.text_budget(size) - (1 << 16)
                and key not in tx
                and key not in staged
                and self._type_of(key) == TYPE_SCRIPT
            ):
                out.add(key)
        return self.lacking

    def fast_write(self, args: list[Any]) -> None:
        self.file_write(args[:2])

    def fast_sections(self, args: list[Any]) -> str:
        """`doc.sections(path)` as "id" or "id=first value" per section (comma-separated): the first value
        where `getValue(0)` would answer a finite number (its JavaScript reading of `repr` is that very
        number), so the prelude answers that call itself."""
        did = args[0]
        return self._sections_answer(did, self._doc(did), _arg(args, 1, str, "path"))

    def _sections_answer(self, did: int, doc: model.Document, path: str) -> str:
        """`fast_sections`' answer for document `did`."""
        out = []
        for sec in doc.find(path):
            sid = self._sec_handle(did, sec)
            values = sec.values
            if values:
                v = model.plain(values[0])
                t = type(v)
                if t is int or (t is float and math.isfinite(v)):
                    out.append(f"{sid}={v!r}")
                    continue
            out.append(str(sid))
        return ",".join(out)

    def fast_sec_get(self, args: list[Any]) -> Any:
        return self.sec_get(args[:3])

    def fast_sec_set(self, args: list[Any]) -> None:
        self.sec_set(args)

    fatal: ScriptError | None = None

    def stop(self, exc: ScriptError) -> None:
        """A limit was hit inside a host call: report it and end the process now (the script could catch
        the JavaScript error and go on)."""
        self.fatal = exc
        with contextlib.suppress(Exception):
            self.pending_logs = self.pending_logs[-50:]
            self.flush_logs(force=True)
            self.pipe.send({"t": "error", "code": exc.code, "message": str(exc)})
        os._exit(3)

    def run(self) -> None:
        import quickjs

        job = self.job
        ctx = quickjs.Context()
        ctx.set_memory_limit(int(job["js_mem_bytes"]))
        ctx.set_max_stack_size(1 << 20)
        # The opened archive is millions of long-lived objects (path maps, the string table) that every
        # full collection would walk again while a script churns through small per-file objects: set them
        # aside (`gc.freeze`, Python docs "gc — Garbage Collector interface"). An evicted document breaks
        # its own cycles (sections ↔ their parent, a lazy document ↔ its methods: `Document.release`), so
        # reference counting frees it and full collections, which walk every live object (the 4,096 live
        # documents, the record caches), are needed ten times less often (the third threshold: 100 young
        # collections per full one instead of 10; classic-200k: 10 full collections, 0.53 s, become 2).
        gc.collect()
        gc.freeze()
        gen0, gen1, _gen2 = gc.get_threshold()
        gc.set_threshold(gen0, gen1, 100)
        # Before the prelude and the script: they must not see the tracker's probe (rejections.py).
        rejected = RejectionTracker.install(ctx)
        ctx.add_callable("__host", self.bridge)
        ctx.add_callable("__hostp", self.fast)
        ctx.set("__nonce", self.nonce)
        ctx.set("__docsLive", self.docs_live)
        ctx.eval(PRELUDE)
        ctx.set("__src", job["source"])
        # The run's progress line said "starting the sandbox" until the script's own progress() (most never
        # call it) or its end: say that it runs now.
        self.pipe.send({"t": "progress", "done": 0.0, "total": None, "message": "running the script"})
        t0 = time.perf_counter()
        try:
            # Compiled as a function body so a top-level `return` ends the script and `this` is undefined.
            ctx.eval("(new Function(__src))(); undefined")
            while ctx.execute_pending_job():
                if self.fatal is not None:
                    break
            # Once no job is left, a rejected promise with no handler can never get one: its error is the
            # run's, as a throw's would be.
            unhandled = rejected.first_unhandled() if rejected is not None and self.fatal is None else None
        except Exception as exc:
            if self.fatal is not None:
                raise self.fatal from None
            raise self._script_error(js_error(exc, line_offset=2)) from None
        finally:
            if rejected is not None:
                rejected.uninstall()
        if unhandled is not None:
            d = js_error(Exception(unhandled), line_offset=2)
            if "line" not in d:
                d.update(outermost_frame(unhandled, line_offset=2))
            raise self._script_error(d, in_promise=True)
        if self.fatal is not None:
            raise self.fatal
        self.timings["script"] = time.perf_counter() - t0
        self.flush_logs(force=True)
        self.finish()

    def _script_error(self, d: dict[str, Any], in_promise: bool = False) -> ScriptError:
        """The run's error for a JavaScript error the script did not catch (`js_error`'s description):
        a host error keeps its code, a syntax error or a limit says so."""
        msg = d["message"]
        code = "SCRIPT_ERROR"
        if "out of memory" in msg:
            code = "LIMIT_EXCEEDED"
            msg = f"the script ran out of memory ({int(self.job['js_mem_bytes']) >> 20} MiB engine limit)"
        elif "stack" in msg.lower() and "exceeded" in msg.lower():
            code = "LIMIT_EXCEEDED"
        m = _CODE.match(msg)
        if m:
            code = m.group(1)
        elif msg.startswith("SyntaxError"):
            code = "SCRIPT_SYNTAX"
        if in_promise:  # the wording browsers use for an unhandled rejection
            msg = f"Uncaught (in promise) {msg}"
        self.flush_logs(force=True)
        return ScriptError(code, msg, **{k: v for k, v in d.items() if k != "message"})

    # ------------------------------------------------------------------------------------------ results

    def _change(self, key: str) -> dict[str, Any] | None:
        """The change frame of a key the run wrote, as it stands now (None: created and deleted in the run)."""
        shown, value = self.tx[key]
        exists = key in self.base
        msg: dict[str, Any] = {"t": "change", "path": shown}
        # No diffs and no old texts here: the parent decompiles the old side itself when a preview
        # shows a change (it cannot take a sandbox's word for what a diff says), and it drops a change
        # whose compiled payload equals the old one.
        if value is DELETED:
            if not exists:
                return None  # created and deleted within the run
            msg["action"] = "delete"
        elif isinstance(value, bytes):
            msg["action"] = "modify" if exists else "add"
            msg["base64"] = base64.b64encode(value).decode()
        else:
            msg["action"] = "modify" if exists else "add"
            msg["text"] = value
            msg["type"] = self._type_of(key)
        msg["warnings"] = self._warnings_for(key)
        needs = self.list_created.get(key, set()) | self.str_requires.get(key, set())
        if needs:
            msg["requires"] = sorted(needs)
        # A JSON character is at most 6 bytes (`\u001f`) and UTF-8 at most 4 per character: a frame whose
        # content is far under the cap is sent without first encoding it a second time just to measure it.
        chars = len(msg.get("text") or msg.get("base64") or "") + len(shown)
        chars += sum(map(len, msg["warnings"])) + sum(map(len, msg.get("requires", ())))
        if chars * 6 + 4096 > CHANGE_FRAME_MAX:  # 4096: the keys, the action, the type, the brackets
            raw = json.dumps(msg, ensure_ascii=False)
            if len(raw.encode()) > CHANGE_FRAME_MAX:
                raise ScriptError("LIMIT_EXCEEDED", f"the new content of {shown} is larger than 32 MiB")
        return msg

    def _send_early(self, key: str) -> None:
        """Send the frame of a stored file the script just wrote, so the parent compiles it while the script
        goes on (`runner._PlanBuilder`); `finish` sends it again only if it changed since (the parent keeps
        the last frame of each key)."""
        msg = self._change(key)
        if msg is not None:
            self.pipe.send(msg)
            self.sent[key] = msg

    def finish(self) -> None:
        t0 = time.perf_counter()
        self.pipe.send({"t": "finishing"})  # the script is over (the parent's progress turns to its compile)
        n = 0
        sent = self.sent
        for key in self.tx:
            msg = self._change(key)
            if msg is None:
                continue  # (never sent early: only stored files are)
            if sent.get(key) != msg:
                self.pipe.send(msg)
            n += 1
        self.pipe.send(
            {
                "t": "done",
                "changes": n,
                "scanned": len(self.scanned),
                "timings": {**self.timings, "finish": time.perf_counter() - t0},
                "filesets": {k: self.filesets[k] for k in sorted(self.fileset_changed)},
            }
        )

    def _warnings_for(self, key: str) -> list[str]:
        # Documents that left the window but are not dropped yet come in parse order after those dropped
        # (`doc_of_key` is in parse order): the same list as if each had been dropped when it left it.
        out = list(self.path_warnings.get(key, ()))
        for did in self.doc_of_key.get(key, ()):
            if did in self.docs:
                out.extend(w for w in self.docs[did].warnings if w not in out)
        return out[:50]

    def _evict(self) -> None:
        """Drop the documents that are no longer live (`_live`: older than the last `docs_live` parsed): a
        script that parses every file of a large archive must not hold them all (their warnings are kept; a
        handle of an evicted one asks to parse again). In bulk, oldest first: a handle is refused as soon as
        its document leaves the window, whether or not it was dropped yet."""
        floor = self.parsed - self.docs_live
        if self.pending:
            self.pending = {n: k for n, k in self.pending.items() if n > floor}
        dead = sorted(d for d in self.docs if d <= floor)
        for did in dead:
            doc = self.docs.pop(did)
            doc.release()
            del self.doc_path[did]
            key = self.doc_key.pop(did)
            dids = self.doc_of_key.get(key)
            if dids is not None:
                with contextlib.suppress(ValueError):
                    dids.remove(did)
                if not dids:
                    del self.doc_of_key[key]
            if doc.warnings:
                kept = self.path_warnings.setdefault(key, [])
                kept.extend(w for w in doc.warnings if w not in kept)
            for sid in self.doc_secs.pop(did, ()):
                sec = self.secs.pop(sid, None)
                self.sec_doc.pop(sid, None)
                if sec is not None:
                    self.sec_ids.pop(id(sec), None)

    # ------------------------------------------------------------------------------------------ files

    def _key(self, path: Any) -> str:
        if not isinstance(path, str) or not path.strip():
            raise ScriptError("INVALID_ARGUMENT", "a path must be a non-empty string")
        key = norm_path(path)
        parts = key.split("/")
        if not key or "" in parts or "." in parts or ".." in parts:
            raise ScriptError("INVALID_ARGUMENT", f"{path!r} is not an archive file path")
        if len(key) > 1024 or _CONTROL.search(key):
            raise ScriptError("INVALID_ARGUMENT", f"{path!r} is not an archive file path")
        return key

    def _new_key(self, path: str) -> str:
        """The key of a file the script creates: a new name follows the import's rules (no drive, reserved
        name or character Windows cannot hold), which `_key` does not ask of names the archive already has."""
        key = self._key(path)
        if not self._exists(key):
            try:
                check_archive_path(path)
            except BridgeError as exc:
                raise ScriptError("INVALID_ARGUMENT", exc.message, hint=exc.hint) from None
        return key

    def _exists(self, key: str) -> bool:
        if key in self.tx:
            return self.tx[key][1] is not DELETED
        return key in self.base

    def _shown(self, key: str) -> str:
        if key in self.tx:
            return self.tx[key][0]
        return self.base[key]

    def _need(self, path: Any) -> str:
        key = self._key(path)
        if not self._exists(key):
            raise ScriptError("NOT_FOUND", f"no file {path!r}")
        return key

    def files(self, args: list[Any]) -> list[str]:
        out = self._visit([k for k in self.order if self._exists(k)])
        out += [v[0] for k, v in self.tx.items() if k not in self.base and v[1] is not DELETED]
        return out

    def listing(self, paths: list[str]) -> dict[str, Any]:
        """A listing for the prelude's file objects: the paths, and — where `fast_parse` may take them — the
        listing's number and how many leading paths are archive files of `visit_keys`."""
        return {"p": paths, "g": self.visit_gen, "n": len(self.visit_keys)}

    def _visit(self, keys: list[str]) -> list[str]:
        self.visit_keys = keys
        self.visit = {k: i for i, k in enumerate(keys)}
        self.ahead = {}
        self.ahead_batch = ([], None)
        # A listed key is taken by position only when `_key` would accept its shown path as it is (the
        # archive's own names normally are: checked over all of them at once).
        self.listings += 1
        self.visit_gen = self.listings
        if not keys or not _plain_keys(keys):
            self.visit_gen = -1
        return [self.base[k] for k in keys]

    def find(self, args: list[Any]) -> str | None:
        key = self._key(_arg(args, 0, str, "path"))
        return self._shown(key) if self._exists(key) else None

    def glob(self, args: list[Any]) -> list[str]:
        rx = glob_regex(_arg(args, 0, str, "pattern"))
        match = rx.fullmatch
        base = self.base
        out = self._visit([k for k in self.order if match(base[k]) and self._exists(k)])
        out += [v[0] for k, v in self.tx.items() if k not in base and v[1] is not DELETED and match(v[0])]
        return out

    def _type_of(self, key: str) -> int:
        if key in self.tx and key not in self.base:
            value = self.tx[key][1]
            return TYPE_BINARY if isinstance(value, bytes) else self._created_type.get(key, TYPE_SCRIPT)
        classic = self.family == "classic" and key not in self.tx and key not in self.staged_keys
        if classic:  # a stored classic file's kind is its name's (`guess_kind`): decided once per suffix
            suffix = _suffix(key)
            known = self._suffix_type.get(suffix)
            if known is not None and key in self.base:
                return known
        try:
            kind = self.ar.file_info(self.base[key]).kind
        except (BridgeError, KeyError):
            return TYPE_BINARY
        out = {"script": TYPE_SCRIPT, "text": TYPE_UNICODE}.get(kind, TYPE_BINARY)
        if classic:
            self._suffix_type[suffix] = out
        return out

    def file_info(self, args: list[Any]) -> dict[str, Any]:
        key = self._need(_arg(args, 0, str, "path"))
        if key in self.tx:
            value = self.tx[key][1]
            size = len(value) if isinstance(value, bytes) else len(value.encode("utf-8"))
        else:
            size = self.ar.file_info(self.base[key]).size
        if self.positions is None:
            self.positions = {k: i for i, k in enumerate(self.order)}
        index = self.positions.get(key, len(self.order))
        return {"index": index, "type": self._type_of(key), "size": size}

    def _text(self, key: str) -> str:
        if key in self.tx:
            value = self.tx[key][1]
            if isinstance(value, str):
                return value
            raise ScriptError("UNSUPPORTED_CHANGE", f"{self.tx[key][0]} has no text form (binary)")
        self.scanned.add(key)
        try:
            return self.ar.read_text(self.base[key])
        except BridgeError as exc:
            raise ScriptError(exc.code.value, f"{self.base[key]}: {exc.message}") from None

    def file_text(self, args: list[Any]) -> str:
        return self._text(self._need(_arg(args, 0, str, "path")))

    def _stage(self, key: str, shown: str, value: Any) -> None:
        if key not in self.tx and len(self.tx) >= int(self.job["max_changes"]):
            raise ScriptError("LIMIT_EXCEEDED", f"a run may change at most {self.job['max_changes']} files")
        self.tx[key] = (shown, value)

    def file_set_text(self, args: list[Any]) -> None:
        key = self._need(_arg(args, 0, str, "path"))
        text = _arg(args, 1, str, "text")
        if self._type_of(key) == TYPE_SCRIPT:
            try:
                lex(text)
            except BridgeError as exc:
                raise ScriptError("SCRIPT_SYNTAX", f"{self._shown(key)}: {exc.message}") from None
        elif self._type_of(key) == TYPE_BINARY:
            raise ScriptError("UNSUPPORTED_CHANGE", f"{self._shown(key)} is binary and has no text form")
        self._stage(key, self._shown(key), text)

    def _parse(self, key: str, stored: bool = False) -> model.Document:
        """The document of a file; `stored`: of its stored payload even where the run has written it since (a
        `pending` document is built when first used: it reads the file as it was when it was parsed)."""
        if self._type_of(key) != TYPE_SCRIPT:
            raise ScriptError("UNSUPPORTED_CHANGE", f"{self._shown(key)} is not a script; use text()")
        doc = self._lazy_doc(key, stored)
        if doc is not None:
            return doc
        tokens = self._codec_tokens(key, stored)
        from_archive = tokens is not None
        if tokens is None:
            if stored:
                raise ScriptError("INTERNAL", f"{self.base[key]} no longer reads as it did")
            text = self._text(key)
            try:
                tokens = lex(text)
            except BridgeError as exc:
                raise ScriptError("SCRIPT_SYNTAX", f"{self._shown(key)}: {exc.message}") from None
        header = "#PVF_File" if self.family == "classic" else None
        doc = model.Document(tokens, header=header, record_width=2 if key.endswith(".lst") else None)
        if from_archive:
            doc.source_tokens = tokens  # the file as stored: its text for the diff, without decoding it again
        return doc

    def _payload(self, key: str) -> bytes:
        return self._payload_tags(key)[0]

    def _payload_tags(self, key: str) -> tuple[bytes, lazy.RecordTags | None]:
        """The payload of an archive file (not one the run wrote), with its type-5 records where it was read
        ahead. Classic payloads of the files the last `pvf.glob()`/`pvf.files()` listed are decrypted
        `AHEAD` at a time in one vectorised pass (one numpy call per file costs more than the cipher
        itself), and their type-5 records found in one more (`lazy.batch_tags`: the tag scan of each file,
        and the answer of `sections(name)` for a file without such a tag, without a loop per file)."""
        got = self.ahead.pop(key, None)
        if got is None and self._read_ahead(key):
            got = self.ahead.pop(key)
        if got is not None:
            batch = self.ahead_batch[1]
            assert batch is not None
            return got[0], batch.of(got[1])
        return self.ar.read(self.base[key]), None

    def _read_ahead(self, key: str) -> bool:
        """Decrypt the stored classic payloads of the last listing from `key` on (`AHEAD` of them) into
        `ahead`, with their type-5 records; False where `key` is not one of them."""
        at = self.visit.get(key)
        if at is None or self.family != "classic" or not self.ar.has_original(self.base[key]):
            return False
        staged = self.staged_keys
        batch = [
            k
            for k in self.visit_keys[at : at + AHEAD]
            if k not in self.tx and k not in staged and self.ar.has_original(self.base[k])
        ]
        if key not in batch:
            return False
        payloads = self.ar.read_originals(batch, release=True)
        self.ahead = {k: (data, i) for i, (k, data) in enumerate(zip(batch, payloads, strict=True))}
        self.ahead_batch = (batch, lazy.BatchTags(payloads))
        self.lacking = (None, set())
        return True

    def _lazy_doc(self, key: str, stored: bool = False) -> model.Document | None:
        """An archive script read lazily (`lazy.classic_document`, `lazy_nkpi.archive_document`), or None (a
        file the run wrote — unless `stored`: the file as it was parsed —, not a binary script, or one whose
        whole decode decides the text budget)."""
        if key in self.tx and not stored:
            return None
        if self.family != "classic":
            doc = lazy_nkpi.archive_document(
                self.ar, self.base[key], record_width=2 if key.endswith(".lst") else None
            )
            if doc is not None:
                self.scanned.add(key)
            return doc
        try:
            if stored:
                got = self.ahead.pop(key, None)
                batch = self.ahead_batch[1]
                if got is not None and batch is not None:
                    data, tags = got[0], batch.of(got[1])
                else:
                    data, tags = self.ar.read(self.base[key]), None
            else:
                data, tags = self._payload_tags(key)
            if not classic_codec.is_script(data):
                return None
            strings = self.ar.strings
            doc = lazy.classic_document(
                data,
                strings.table,
                strings.link_text,
                header="#PVF_File",
                record_width=2 if key.endswith(".lst") else None,
                tags=tags,
            )
        except BridgeError:
            return None
        if doc is not None:
            self.scanned.add(key)
        return doc

    def _codec_tokens(self, key: str, stored: bool = False) -> list[Any] | None:
        """The tokens of an archive script straight from the family codec — the same tokens `lex` reads
        from `read_text` (the printer is canonical), without printing and re-lexing every scanned file."""
        if key in self.tx and not stored:
            return None
        path = self.base[key]
        try:
            data = self.ar.read(path)
            if self.family == "classic":
                from deskbridge.kinds.pvf.script import classic_codec

                if not classic_codec.is_script(data):
                    return None
                strings = self.ar.strings
                tokens = classic_codec.to_tokens(data, strings.table, strings.link_text)
            else:
                from deskbridge.kinds.pvf.archive.nkpi import DATA_SCRIPT
                from deskbridge.kinds.pvf.script import nkpi_codec

                if self.ar.data_type(path) != DATA_SCRIPT:
                    return None
                tokens = nkpi_codec.to_tokens(data, self.ar.pools)
        except BridgeError:
            return None
        self.scanned.add(key)
        return tokens

    def file_parse(self, args: list[Any]) -> int:
        key = self._need(_arg(args, 0, str, "path"))
        return self._register(key, self._parse(key))

    def _register(self, key: str, doc: model.Document, did: int | None = None) -> int:
        """The handle of a newly parsed document (its parse number), or of a `pending` one now built."""
        if did is None:
            did = self.parsed = self.parsed + 1
        self.docs[did] = doc
        self.doc_path[did] = self._shown(key)
        self.doc_key[did] = key
        dids = self.doc_of_key.setdefault(key, [])
        if dids and dids[-1] > did:
            bisect.insort(dids, did)  # a pending document built late: keep parse order (`_warnings_for`)
        else:
            dids.append(did)
        if len(self.docs) + len(self.pending) > self.docs_live + self._slack:
            self._evict()
        return did

    def file_write(self, args: list[Any]) -> None:
        key = self._need(_arg(args, 0, str, "path"))
        doc = self._doc(args[1] if len(args) > 1 else None)
        text = doc.text()  # the old text and the diff are the parent's (from the payload it reads)
        first = key not in self.tx
        self._stage(key, self._shown(key), text)
        # Sent now while the frames sent so far are those of every file written so far, so the parent still
        # gets them in the order of the run's first writes (the order its compile adds new strings in).
        if first and key in self.base and len(self.sent) == len(self.tx) - 1:
            self._send_early(key)

    def create_file(self, args: list[Any]) -> str:
        path = _arg(args, 0, str, "path")
        key = self._new_key(path)
        kind = _index(args[1] if len(args) > 1 else TYPE_SCRIPT, "type")
        if kind not in (TYPE_SCRIPT, TYPE_UNICODE):
            raise ScriptError("INVALID_ARGUMENT", "type is pvf.types.script (1) or pvf.types.unicode (3)")
        if self._exists(key):
            raise ScriptError("TARGET_EXISTS", f"{path!r} exists", hint="copyFile(…, true) overwrites")
        text = args[2] if len(args) > 2 and args[2] is not None else None
        if text is None:
            text = "#PVF_File\n" if kind == TYPE_SCRIPT and self.family == "classic" else ""
        if not isinstance(text, str):
            raise ScriptError("INVALID_ARGUMENT", "text must be a string")
        if kind == TYPE_SCRIPT:
            try:
                lex(text)
            except BridgeError as exc:
                raise ScriptError("SCRIPT_SYNTAX", f"{path}: {exc.message}") from None
        shown = path.replace("\\", "/").lstrip("/")
        self._created_type = {**self._created_type, key: kind}
        self._stage(key, shown, text)
        self.created.add(key)
        return shown

    def copy_file(self, args: list[Any]) -> str:
        src = self._need(_arg(args, 0, str, "from"))
        to_path = _arg(args, 1, str, "to")
        dst = self._new_key(to_path)
        overwrite = bool(args[2]) if len(args) > 2 else False
        if self._exists(dst) and not overwrite:
            raise ScriptError("TARGET_EXISTS", f"{to_path!r} exists; pass overwrite = true")
        if src in self.tx:
            value = self.tx[src][1]
        elif self._type_of(src) == TYPE_BINARY:
            value = self.ar.read(self.base[src])
        else:  # as text, so the copy reads like any file and compiles against the current tables
            value = self._text(src)
        shown = self._shown(dst) if self._exists(dst) else to_path.replace("\\", "/").lstrip("/")
        if not self._exists(dst):
            self.created.add(dst)
        if isinstance(value, str):
            self._created_type = {**self._created_type, dst: self._type_of(src)}
        self._stage(dst, shown, value)
        return shown

    def delete_file(self, args: list[Any]) -> bool:
        key = self._key(_arg(args, 0, str, "path"))
        if not self._exists(key):
            return False
        self._stage(key, self._shown(key), DELETED)
        return True

    def counts(self, args: list[Any]) -> dict[str, int]:
        return {"modified": len(self.tx), "scanned": len(self.scanned)}

    def ori_str(self, args: list[Any]) -> str | None:
        ref = args[0] if args else None
        if isinstance(ref, str):
            m = _LINK.match(ref.strip())
            if m is None:
                raise ScriptError("INVALID_ARGUMENT", f"{ref!r} is not a string link like <0::name_1>")
            table, key = int(m.group(1)), m.group(2)
        elif isinstance(ref, dict) and ref.get("type") == "link":
            tok = model.from_json(ref)
            table, key = tok.link_id, str(tok.value)
        else:
            raise ScriptError("INVALID_ARGUMENT", "getOriStrValue takes '<id::key>' or a link value")
        return self.link_text(table, key)

    def link_text(self, table: int, key: str) -> str | None:
        from deskbridge.kinds.pvf.service import _link_text

        if (table, key) in self.new_strs:
            return self.new_strs[(table, key)]
        return _link_text(self.ar, table, key)

    # ------------------------------------------------------------------------------------------ 110US strings

    @property
    def registers_strings(self) -> bool:
        """110US (the page-guarded nkpi variant) keeps script text in `.str` tables: there a plain string `set`
        registers a `.str` entry and writes a type-8 reference to it, as pvfine's script API does (pvfine
        `docs/脚本工作区设计.md`: "on 110US a plain string set auto-registers a .str entry and writes a type-8
        reference"); `setStrValue` still writes an inline string on purpose."""
        return getattr(self.ar, "variant", None) == "paged"

    def _string_tables(self) -> list[tuple[int, str]]:
        """(table id, file key) of every `.str` table `n_string.lst` registers that exists, in list order."""
        if self._nstring is None:
            from deskbridge.kinds.pvf.archive.nkpi_lists import read_list

            out: list[tuple[int, str]] = []
            for lst in ("list/n_string.lst", "n_string.lst"):
                key = self._key(lst)
                if key not in self.base:
                    continue
                reg = read_list(self.ar, self.base[key])
                for table_id, stored in reg.entries:
                    for candidate in (stored, reg.to_archive_path(stored)):
                        if self._exists(self._key(candidate)):
                            out.append((table_id, self._key(candidate)))
                            break
                break
            self._nstring = out
        return self._nstring

    def _register_string(self, did: Any, value: str) -> Any:
        """A type-8 reference to a `.str` entry holding `value`: the table in the script's own top folder
        (else the first registered one), key `pvfjs_<n>` (the first free n); one entry per text per table
        within a run. The script's change `requires` the `.str` change, so a plan selects them together."""
        from deskbridge.kinds.pvf.script.nkpi_codec import T_REF8
        from deskbridge.kinds.pvf.script.text import typed_token
        from deskbridge.kinds.pvf.strings.strfile import StrFile

        tables = self._string_tables()
        if not tables:
            raise ScriptError(
                "UNSUPPORTED_CHANGE",
                "a plain string on 110US goes into a .str table, but n_string.lst registers none that exists",
                hint="Register a .str table in n_string.lst, or write an inline string with setStrValue.",
            )
        doc_shown = self.doc_path.get(did) if isinstance(did, int) else None
        top = (doc_shown or "").replace("\\", "/").split("/", 1)[0].lower()
        table_id, str_key = next(((t, k) for t, k in tables if k.split("/", 1)[0] == top), tables[0])
        ref = next((k for (t, k), v in self.new_strs.items() if t == table_id and v == value), None)
        if ref is None:
            table = StrFile.from_text(self._text(str_key))
            taken = table.entries()
            n = 0
            while f"pvfjs_{n}" in taken:
                n += 1
            ref = f"pvfjs_{n}"
            try:
                table.set(ref, value)
            except BridgeError as exc:
                raise ScriptError("INVALID_ARGUMENT", f"{value[:80]!r}: {exc.message}") from None
            self._stage(str_key, self._shown(str_key), table.to_text())
            self.new_strs[(table_id, ref)] = value
        if doc_shown is not None:
            self.str_requires.setdefault(self._key(doc_shown), set()).add(self._shown(str_key))
        return typed_token(T_REF8, f"<{table_id}::{ref}>")

    def _token(self, did: Any, value: Any, old: Any = None) -> Any:
        """A script value → token (`model.from_json`), except a plain string on 110US (`_register_string`)."""
        if isinstance(value, str) and self.registers_strings:
            return self._register_string(did, value)
        return model.from_json(value, old)

    # ------------------------------------------------------------------------------------------ documents

    def _new_id(self) -> int:
        n = self._next
        self._next += 1
        return n

    def _doc(self, did: Any) -> model.Document:
        doc = self.docs.get(did) if type(did) is int and did > self.parsed - self.docs_live else None
        if doc is None and type(did) is int and did in self.pending and did > self.parsed - self.docs_live:
            key = self.pending.pop(did)
            doc = self._parse(key, stored=True)
            self._register(key, doc, did)
        if doc is None:
            raise ScriptError(
                "INVALID_ARGUMENT",
                "not a live document of this run (only the most recently parsed documents are kept: parse again)",
            )
        return doc

    def _sec_handle(self, did: int, sec: model.Section) -> int:
        sid = self.sec_ids.get(id(sec))
        if sid is None:
            sid = self._new_id()
            self.sec_ids[id(sec)] = sid
            self.secs[sid] = sec
            self.sec_doc[sid] = did
            self.doc_secs.setdefault(did, []).append(sid)
        return sid

    def _sec(self, sid: Any) -> model.Section:
        sec = self.secs.get(sid) if isinstance(sid, int) and not isinstance(sid, bool) else None
        if sec is None or self.sec_doc[sid] <= self.parsed - self.docs_live:
            raise ScriptError(
                "INVALID_ARGUMENT", "not a live section of this run (its document was evicted?)"
            )
        if not model.attached(sec):
            raise ScriptError("INVALID_ARGUMENT", f"[{sec.name}] was deleted")
        return sec

    def _occ(self, v: Any) -> int | None:
        return None if v is None else _index(v, "occurrence")

    def doc_sections(self, args: list[Any]) -> list[int]:
        did = args[0] if args else None
        doc = self._doc(did)
        return [self._sec_handle(did, s) for s in doc.find(_arg(args, 1, str, "path"))]

    def doc_section(self, args: list[Any]) -> int | None:
        did = args[0] if args else None
        doc = self._doc(did)
        sec = doc.section(_arg(args, 1, str, "path"), self._occ(args[2] if len(args) > 2 else None))
        return None if sec is None else self._sec_handle(did, sec)

    def _value(self, sec: model.Section | None, i: int, how: str) -> Any:
        if sec is None or i >= len(sec.values):
            return None
        tok = sec.values[i]
        if how == "raw":
            return model.to_json(tok)
        if how == "ori":
            if tok.kind is Kind.LINK:
                return self.link_text(tok.link_id, str(tok.value))
            return model.plain(tok)
        return model.plain(tok)

    def doc_get(self, args: list[Any]) -> Any:
        doc = self._doc(args[0] if args else None)
        sec = doc.section(
            _arg(args, 1, str, "path"), self._occ(args[2] if len(args) > 2 else None), touch=True
        )
        return self._value(sec, _index(args[3] if len(args) > 3 else 0, "valueIndex"), str(args[4]))

    def _set_value(self, sec: model.Section, i: int, value: Any, as_string: bool, did: Any = None) -> None:
        if i > len(sec.values):
            raise ScriptError(
                "INVALID_ARGUMENT", f"[{sec.name}] has {len(sec.values)} values; index {i} is past the end"
            )
        old = sec.values[i] if i < len(sec.values) else None
        tok = string_token(value) if as_string else self._token(did, value, old)
        if i == len(sec.values):
            sec.values.append(tok)
        else:
            sec.values[i] = tok

    def doc_set(self, args: list[Any]) -> None:
        did = args[0] if args else None
        doc = self._doc(did)
        path = _arg(args, 1, str, "path")
        value = args[2] if len(args) > 2 else None
        o = args[3] if len(args) > 3 and isinstance(args[3], dict) else {}
        as_string = bool(args[4]) if len(args) > 4 else False
        sec = doc.section(path, self._occ(o.get("occurrence")), touch=True)
        if sec is None:
            if not o.get("create"):
                raise ScriptError("NOT_FOUND", f"no section [{path}]", hint="pass {create: true} to add it")
            sec = doc.create(path, bool(o.get("endTag")))
        self._set_value(sec, _index(o.get("valueIndex", 0), "valueIndex"), value, as_string, did)

    def doc_delete(self, args: list[Any]) -> bool:
        doc = self._doc(args[0] if args else None)
        sec = doc.section(
            _arg(args, 1, str, "path"), self._occ(args[2] if len(args) > 2 else None), touch=True
        )
        if sec is None or sec.parent is None:
            return False
        sec.parent.children.remove(sec)
        return True

    def _tokens(self, values: Any, did: Any = None) -> list[Any]:
        if not isinstance(values, list):
            raise ScriptError("INVALID_ARGUMENT", "values must be an array")
        return [self._token(did, v) for v in values]

    def doc_append(self, args: list[Any]) -> int:
        did = args[0] if args else None
        doc = self._doc(did)
        sec = model.append_section(
            doc.root, _arg(args, 1, str, "name"), self._tokens(args[2], did), bool(args[3])
        )
        return self._sec_handle(did, sec)

    def doc_warnings(self, args: list[Any]) -> list[str]:
        return list(self._doc(args[0] if args else None).warnings)

    def sec_info(self, args: list[Any]) -> dict[str, Any]:
        sid = args[0] if args else None
        sec = self._sec(sid)
        doc = self.docs[self.sec_doc[sid]]
        same = doc.find(sec.path())
        return {
            "name": sec.name,
            "hasEndTag": sec.has_end,
            "path": sec.path(),
            "occurrence": next((i for i, s in enumerate(same) if s is sec), 0),
        }

    def sec_values(self, args: list[Any]) -> list[Any]:
        return [model.to_json(t) for t in self._sec(args[0] if args else None).values]

    def sec_children(self, args: list[Any]) -> list[int]:
        sid = args[0] if args else None
        sec = self._sec(sid)
        return [self._sec_handle(self.sec_doc[sid], c) for c in sec.children]

    def sec_remove_children(self, args: list[Any]) -> int:
        sec = self._sec(args[0] if args else None)
        name = args[1] if len(args) > 1 else None
        keep = [
            c for c in sec.children if name is not None and c.name.lower() != str(name).strip("[]").lower()
        ]
        removed = len(sec.children) - len(keep)
        sec.children[:] = keep
        return removed

    def sec_get(self, args: list[Any]) -> Any:
        sec = self._sec(args[0] if args else None)
        return self._value(sec, _index(args[1] if len(args) > 1 else 0), str(args[2]))

    def sec_set(self, args: list[Any]) -> None:
        sid = args[0] if args else None
        sec = self._sec(sid)
        self._set_value(
            sec,
            _index(args[2] if len(args) > 2 else 0),
            args[1] if len(args) > 1 else None,
            bool(args[3]),
            self.sec_doc.get(sid),
        )

    def sec_set_values(self, args: list[Any]) -> None:
        sec = self._sec(args[0] if args else None)
        values = args[1] if len(args) > 1 else None
        if not isinstance(values, list):
            raise ScriptError("INVALID_ARGUMENT", "setValues takes an array")
        old = sec.values
        did = self.sec_doc.get(args[0])
        sec.values = [self._token(did, v, old[i] if i < len(old) else None) for i, v in enumerate(values)]

    def sec_append(self, args: list[Any]) -> None:
        sid = args[0] if args else None
        sec = self._sec(sid)
        sec.values.append(self._token(self.sec_doc.get(sid), args[1] if len(args) > 1 else None))

    def sec_append_section(self, args: list[Any]) -> int:
        sid = args[0] if args else None
        sec = self._sec(sid)
        child = model.append_section(
            sec, _arg(args, 1, str, "name"), self._tokens(args[2], self.sec_doc.get(sid)), bool(args[3])
        )
        return self._sec_handle(self.sec_doc[sid], child)

    def sec_delete(self, args: list[Any]) -> None:
        sec = self._sec(args[0] if args else None)
        assert sec.parent is not None
        sec.parent.children.remove(sec)

    # ------------------------------------------------------------------------------------------ lists

    def _registry(self, key: str) -> Any:
        if key in self.lists:
            return self.lists[key]
        from deskbridge.kinds.pvf.lists import Registry

        doc = self._parse(key)
        toks = doc.tokens()
        entries = []
        for i in range(0, len(toks) - 1, 2):
            a, b = toks[i], toks[i + 1]
            if a.kind is Kind.INT and b.kind is Kind.STRING:
                entries.append((int(a.value), str(b.value)))
        shown = self._shown(key)
        reg = Registry(shown, entries)
        if self.family != "classic":
            from deskbridge.kinds.pvf.archive.nkpi_lists import read_list

            with contextlib.suppress(BridgeError):
                reg.root_relative = (
                    read_list(self.ar, self.base[key]).root_relative if key in self.base else False
                )
        self.lists[key] = (reg, doc.header)
        return self.lists[key]

    def lst(self, args: list[Any]) -> str:
        path = _arg(args, 0, str, "path")
        key = self._need(path)
        if not key.endswith(".lst"):
            raise ScriptError("INVALID_ARGUMENT", f"{path!r} is not a .lst registry")
        self._registry(key)
        return self._shown(key)

    def lst_entries(self, args: list[Any]) -> list[list[Any]]:
        reg, _ = self._registry(self._need(_arg(args, 0, str, "path")))
        return [[i, reg.to_archive_path(p)] for i, p in reg.entries]

    def _write_list(self, key: str) -> None:
        reg, header = self.lists[key]
        toks = []
        for i, p in reg.entries:
            toks += [int_token(i), string_token(p)]
        from deskbridge.kinds.pvf.script.text import print_tokens

        self._stage(key, self._shown(key), print_tokens(toks, header=header, record_width=2))

    def lst_set(self, args: list[Any]) -> None:
        key = self._need(_arg(args, 0, str, "path"))
        reg, _ = self._registry(key)
        pairs = args[1] if len(args) > 1 and isinstance(args[1], list) else []
        for pair in pairs:
            if not isinstance(pair, list) or len(pair) != 2:
                raise ScriptError("INVALID_ARGUMENT", "set(id, path)")
            item_id = _index(pair[0], "id")
            target = self._key(pair[1])
            if not self._exists(target):
                raise ScriptError("NOT_FOUND", f"{pair[1]!r} does not exist; create it before registering it")
            base = reg.base_dir()
            shown = self._shown(target)
            if base and not norm_path(shown).startswith(norm_path(base) + "/"):
                raise ScriptError(
                    "INVALID_ARGUMENT", f"{shown} is not under {base}/, the folder of this list"
                )
            rel = posixpath.relpath(shown, base) if base else shown
            for n, (i, _p) in enumerate(reg.entries):
                if i == item_id:
                    reg.entries[n] = (item_id, rel)
                    break
            else:
                reg.entries.append((item_id, rel))
            if target in self.created:
                self.list_created.setdefault(key, set()).add(shown)
        self._write_list(key)

    def lst_unset(self, args: list[Any]) -> bool:
        key = self._need(_arg(args, 0, str, "path"))
        reg, _ = self._registry(key)
        item_id = _index(args[1] if len(args) > 1 else None, "id")
        before = len(reg.entries)
        reg.entries[:] = [(i, p) for i, p in reg.entries if i != item_id]
        if len(reg.entries) == before:
            return False
        self._write_list(key)
        return True

    def lst_get_id(self, args: list[Any]) -> int | None:
        reg, _ = self._registry(self._need(_arg(args, 0, str, "path")))
        return reg.find_id(_arg(args, 1, str, "path"))

    # ------------------------------------------------------------------------------------------ filesets

    def _fs_name(self, v: Any) -> str:
        if not isinstance(v, str) or not 0 < len(v) <= 128:
            raise ScriptError("INVALID_ARGUMENT", "a fileset name is 1 to 128 characters")
        return v

    def fs_find(self, args: list[Any]) -> str | None:
        name = self._fs_name(args[0] if args else None)
        return name if name in self.filesets else None

    def _fs_write(self, name: str, paths: Any) -> None:
        if not self.job.get("fileset_writes"):
            raise ScriptError(
                "UNSUPPORTED_CHANGE",
                "filesets are the person's own lists (user config, not the archive); MCP runs may read them "
                "but not change them",
            )
        if (
            not isinstance(paths, list)
            or len(paths) > FILESET_MAX
            or not all(isinstance(p, str) for p in paths)
        ):
            raise ScriptError("INVALID_ARGUMENT", f"a fileset holds up to {FILESET_MAX} path strings")
        self.filesets[name] = list(dict.fromkeys(p.replace("\\", "/").lstrip("/") for p in paths))
        self.fileset_changed.add(name)

    def fs_create(self, args: list[Any]) -> str:
        name = self._fs_name(args[0] if args else None)
        if name in self.filesets:
            raise ScriptError("TARGET_EXISTS", f"fileset {name!r} exists")
        self._fs_write(name, args[1] if len(args) > 1 else [])
        return name

    def fs_get(self, args: list[Any]) -> list[str]:
        name = self._fs_name(args[0] if args else None)
        if name not in self.filesets:
            raise ScriptError("NOT_FOUND", f"no fileset {name!r}")
        return list(self.filesets[name])

    def fs_set(self, args: list[Any]) -> None:
        name = self._fs_name(args[0] if args else None)
        if name not in self.filesets:
            raise ScriptError("NOT_FOUND", f"no fileset {name!r}")
        self._fs_write(name, args[1] if len(args) > 1 else [])

    # ------------------------------------------------------------------------------------------ log

    def log(self, args: list[Any]) -> None:
        level = args[0] if args and args[0] in ("info", "warn", "error") else "info"
        text = str(args[1]) if len(args) > 1 else ""
        self.log_bytes += len(text.encode("utf-8", "replace")) + 1
        self.log_lines += 1
        max_lines = int(self.job.get("log_max_lines", LOG_MAX_LINES))
        max_bytes = int(self.job.get("log_max_bytes", LOG_MAX_BYTES))
        if self.log_bytes > max_bytes or self.log_lines > max_lines:
            raise ScriptError(
                "LIMIT_EXCEEDED",
                f"the script logged more than {max_lines} lines or {max_bytes >> 20} MiB; it was stopped",
            )
        self.pending_logs.append({"level": level, "text": text[:8192]})
        self.flush_logs()

    def flush_logs(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.pending_logs and (force or len(self.pending_logs) >= 200 or now - self.last_flush > 0.2):
            self.pipe.send({"t": "log", "entries": self.pending_logs})
            self.pending_logs = []
            self.last_flush = now

    def progress(self, args: list[Any]) -> None:
        done = args[0] if args else 0
        total = args[1] if len(args) > 1 else None
        msg = args[2] if len(args) > 2 and isinstance(args[2], str) else None
        if not isinstance(done, int | float) or isinstance(done, bool):
            raise ScriptError("INVALID_ARGUMENT", "progress(done, total, message?)")
        self.flush_logs(force=True)
        self.pipe.send(
            {
                "t": "progress",
                "done": float(done),
                "total": float(total) if isinstance(total, int | float) else None,
                "message": None if msg is None else msg[:200],
            }
        )
