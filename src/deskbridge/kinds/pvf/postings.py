"""Token postings: the data behind content search — which files hold which distinct token, and every token's text.

A script's text is its tokens laid out with TABs and line breaks (docs/pvf-script-text.md "Layout"); a file
is a 5-byte record per token. Game data repeats a small vocabulary (the same strings, tags and numbers in
thousands of files), so instead of decompiling and indexing every file's text, the index keeps

* the **postings**: for each distinct record `(type, value)` the sorted list of files that contain it,
  built with one vectorised sort over every record of the archive (no file is decompiled);
* the **vocabulary**: the text each distinct record can print as (the family codec's own `record_token`),
  case-folded and cut at TABs and line breaks into entries, all in one string searched with `str.find`.

Why that finds every hit: a hit is a line of the case-folded text containing the case-folded query. The
printer puts only TABs and line breaks between tokens, so each TAB-free piece of the query lies inside the
text of one token — inside one vocabulary entry. A file can therefore only match if, for every piece, it
holds a token whose entry contains that piece. Those files are the candidates; each is then decompiled and
its lines matched exactly as before (`search.matching_lines`), so the index proposes and the text decides.
The vocabulary over-approximates where a record's text depends on its file (an nkpi string repeated at
another offset prints raw as `{N=offset}`; a classic link `<id::key`text`>` is posted under its key
record), which only adds candidates. Text files (`.str`, `.nut`, UTF-16 tables, the string-table listing)
have no tokens: each of their line pieces is an entry of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.archive.base import norm_path

FILE_BITS = 23
"""Bits of a file number in a posting (8.4 M files; the largest real archive, 110US, has 4.3 M)."""
FILE_MASK = (1 << FILE_BITS) - 1
EXT = 1 << 40
"""Keys at or above this are not records: the classic header line and text-file line pieces."""
HEADER_KEY = EXT
LINE_BASE = EXT + 1
BATCH_FILES = 1 << 15
ENTRY_MATCH_MAX = 50_000
"""A piece found in more vocabulary entries than this selects nothing (nearly every file): it is not used
to narrow the candidates, the other pieces are (or every file is a candidate, confirmed page by page)."""
POSTINGS_MAX = 8_000_000
_SEPARATORS = re.compile("[\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]+")
LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
"""What `str.splitlines` splits on: a query holding one of these can match no line."""
_REC = np.dtype([("t", "u1"), ("v", "<u4")])


def pieces(text: str) -> list[str]:
    """Case-folded TAB- and line-break-free pieces of `text` (vocabulary entries, or a query's pieces)."""
    return [p for p in _SEPARATORS.split(text.casefold()) if p]


# --------------------------------------------------------------------------------------------- reading


@dataclass
class Extracted:
    """Postings of one range of files: sorted unique `key << FILE_BITS | file` values, plus what the
    vocabulary needs from them (link pairs, text-file line pieces)."""

    combined: np.ndarray
    pairs: np.ndarray
    lines: list[str]
    line_base: int


def _reader(ar: Any) -> Callable[[int, int], list[tuple[str, Any, bytes]]]:
    """`read(start, stop)` → (path, nkpi data type or None, payload on disk) of files `start:stop` in the
    order of the unstaged `paths()`. nkpi files are classified by their data type alone, so their path is
    left empty (decoding a million paths cost more than a second, in each process of a build)."""
    if ar.family == "classic":
        return lambda start, stop: [(p, None, data) for p, data in ar.original_payloads(start, stop)]
    every = ar.original_entries()
    files = ar.files

    def read(start: int, stop: int) -> list[tuple[str, Any, bytes]]:
        entries = every[start:stop]
        if not entries:
            return []
        cols = [files[c][entries].tolist() for c in ("type", "chunk", "offset", "size")]
        out: list[tuple[str, Any, bytes]] = []
        last_c, plain = -1, b""
        for dt, c, o, n in zip(*cols, strict=True):
            if dt not in (1, 3):
                out.append(("", dt, b""))
                continue
            if c != last_c:
                try:
                    plain = ar.chunk(c)
                except BridgeError:
                    out.append(("", -1, b""))
                    continue
                last_c = c
            out.append(("", dt, plain[o : o + n]))
        return out

    return read


def _classifier(ar: Any) -> Callable[[str, Any, bytes], tuple[bytes | None, str | None]]:
    """`classify(path, dt, data)`: (token records, None) for a script, (None, text) for a text file, (None,
    None) for the rest — decided as the archive's `read_text` decides it (imports bound once, not per file)."""
    if ar.family == "classic":
        from deskbridge.kinds.pvf.archive.classic_text import STRINGTABLE, decode_text, text_encoding_for
        from deskbridge.kinds.pvf.script import classic_codec

        is_script, encoding = classic_codec.is_script, ar.encoding

        def classic(path: str, dt: Any, data: bytes) -> tuple[bytes | None, str | None]:
            if norm_path(path) == STRINGTABLE:
                try:
                    return None, ar.strings.stringtable_listing()
                except BridgeError:
                    return None, None
            if is_script(data):
                return (data[2:], None) if (len(data) - 2) % 5 == 0 else (None, None)
            return None, decode_text(data, text_encoding_for(path, encoding))

        return classic
    from deskbridge.kinds.pvf.script import nkpi_codec

    decode_utf16 = nkpi_codec.decode_utf16_text

    def nkpi(path: str, dt: Any, data: bytes) -> tuple[bytes | None, str | None]:
        if dt == 1:
            return (data, None) if len(data) % 5 == 0 else (None, None)
        if dt == 3:
            try:
                return None, decode_utf16(data)[0]
            except BridgeError:
                return None, None
        return None, None

    return nkpi


def extract(
    ar: Any,
    start: int,
    stop: int,
    line_base: int = LINE_BASE,
    progress: Callable[[int], None] | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> Extracted:
    """Postings of the files at positions `start:stop` of the archive's unstaged `paths()` (file numbers are
    those positions)."""
    classic = ar.family == "classic"
    read = _reader(ar)
    classify = _classifier(ar)
    parts: list[np.ndarray] = []
    pairs: list[np.ndarray] = []
    lines: dict[str, int] = {}
    for lo in range(start, stop, BATCH_FILES):
        if cancelled():
            raise InterruptedError("index build cancelled")
        hi = min(stop, lo + BATCH_FILES)
        recs_list: list[bytes] = []
        rec_files: list[int] = []
        counts: list[int] = []
        extra: list[int] = []
        for fid, (path, dt, data) in enumerate(read(lo, hi), start=lo):
            recs, text = classify(path, dt, data)
            if recs is not None:
                recs_list.append(recs)
                rec_files.append(fid)
                counts.append(len(recs) // 5)
                if classic:
                    extra.append((HEADER_KEY << FILE_BITS) | fid)
            elif text:
                for piece in set(pieces(text)):
                    lid = lines.setdefault(piece, len(lines))
                    extra.append(((line_base + lid) << FILE_BITS) | fid)
        recs = np.frombuffer(b"".join(recs_list), dtype=_REC)
        fids = np.repeat(np.array(rec_files, dtype=np.uint64), np.array(counts, dtype=np.int64))
        t = recs["t"].astype(np.uint64)
        v = recs["v"].astype(np.uint64)
        comb = (((t << np.uint64(32)) | v) << np.uint64(FILE_BITS)) | fids
        if classic and len(t) > 1:
            # A string link is a type-9 record (table id) right before a type-10 record (key) in one file.
            m = (
                (recs["t"][:-1] == 9)
                & (recs["t"][1:] == 10)
                & (fids[:-1] == fids[1:])
                & (v[:-1] <= 0x7FFFFFFF)
            )
            if m.any():
                pairs.append(_sorted_unique((v[:-1][m] << np.uint64(32)) | v[1:][m]))
        if extra:
            comb = np.concatenate([comb, np.array(extra, dtype=np.uint64)])
        parts.append(_sorted_unique(comb))
        if progress is not None:
            progress(hi)
    combined = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    combined.sort()  # batches hold disjoint files: sorted, they are unique
    pair_arr = _sorted_unique(np.concatenate(pairs)) if pairs else np.empty(0, dtype=np.uint64)
    return Extracted(combined, pair_arr, list(lines), line_base)


# --------------------------------------------------------------------------------------------- two processes

PARALLEL_MIN_FILES = 40_000
"""Archives with at least this many files are read in two processes (below it, starting a second
interpreter costs more than it saves)."""
WORKERS_ENV = "DESKBRIDGE_PVF_INDEX_WORKERS"
"""`0` reads every file in the building process, `1` always uses a second one; unset = a second process when
the machine has 2+ cores, one of them is idle and the archive is nkpi (`_workers`)."""
WORKER_LINE_BASE = EXT + (1 << 39)
"""Line-piece keys of the worker's half start here (the building process's start at `LINE_BASE`), so the two
halves' text-file pieces never share a key."""


def _worker_main(
    archive_path: str,
    options: dict[str, Any],
    start: int,
    stop: int,
    out_dir: str,
    done: Any,
) -> None:
    """Entry of the second process (spawned: the server runs threads, so it is never forked): the postings
    of files `start:stop`, written as `part.combined.npy`, `part.pairs.npy`, `part.lines.json`."""
    import json
    from pathlib import Path

    from deskbridge.kinds.pvf.archive import open_archive

    ar = open_archive(Path(archive_path), **options)
    try:

        def step(hi: int) -> None:
            done.value = hi - start

        ex = extract(ar, start, stop, WORKER_LINE_BASE, progress=step)
    finally:
        ar.close()
    out = Path(out_dir)
    np.save(out / "part.combined.npy", ex.combined)
    np.save(out / "part.pairs.npy", ex.pairs)
    (out / "part.lines.json").write_text(json.dumps(ex.lines), "utf-8")


def _workers(family: str) -> int:
    import os

    from deskbridge.core.limits import env_count

    chosen = env_count(WORKERS_ENV)
    if chosen is not None:
        return chosen
    cores = os.cpu_count() or 1
    if cores < 2 or family == "classic":
        # classic: the worker's own open (string-table listing, the tree) eats what its half saves — measured
        # on classic-200k at load 1.1–1.3: 25.8 s in two processes vs 22.9 s in one.
        return 0
    # A second process only shortens the build when it gets a core of its own: on a busy machine it adds its
    # start-up and a second archive open (≈ 4–7 s of CPU on classic-200k / nkpi-1m) and the two halves share
    # the same core. Measured at load 6–7 on 2 cores: nkpi-1m 48.7 s in one process vs 66.4 s in two; with
    # about one core free (load 2.7–4.5, two other builds running) 35.9 s in one vs 32.1 s in two.
    try:
        busy = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average (Windows): assume the cores are free
        busy = 0.0
    return 1 if busy <= cores - 1 else 0


def extract_parallel(
    ar: Any,
    archive_path: Any,
    options: dict[str, Any],
    total: int,
    work_dir: Any,
    progress: Callable[[int], None] | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> list[Extracted]:
    """The postings of every file of the archive, as one `Extracted` per contiguous range of files (the
    index stores each as its own segment, so the halves are never merged). Building one's postings is pure
    Python/numpy work bound to one core by the GIL, so on a machine with two cores the second half is read
    by a spawned process that opens the archive itself (`_worker_main`) while this one reads the first.
    If the process cannot start or fails, this process reads that half too."""
    import multiprocessing
    from pathlib import Path

    if total < PARALLEL_MIN_FILES or _workers(ar.family) == 0:
        return [extract(ar, 0, total, progress=progress, cancelled=cancelled)]
    # The second process pays an interpreter start and an archive open first: it takes a little less.
    mid = total // 2 + total // 40
    if ar.family == "classic":
        # The pack encoding this process detected (or was given): the worker reads the same texts and
        # does not detect it again (a scan of the whole string table).
        options = {**options, "encoding": ar.encoding}
    ctx = multiprocessing.get_context("spawn")
    out = Path(work_dir)
    out.mkdir(parents=True, exist_ok=True)
    done = ctx.Value("q", 0, lock=False)
    proc = None
    try:
        proc = ctx.Process(
            target=_worker_main,
            args=(str(archive_path), options, mid, total, str(out), done),
            name="pvf-index-worker",
            daemon=True,
        )
        proc.start()
    except Exception:  # cannot spawn here (options not picklable, no resources): one process
        proc = None
    try:

        def step(hi: int) -> None:
            if progress is not None:
                progress(hi + (int(done.value) if proc is not None else 0))

        if proc is None:
            return [extract(ar, 0, total, progress=progress, cancelled=cancelled)]
        first = extract(ar, 0, mid, progress=step, cancelled=cancelled)
        while proc.is_alive():
            if cancelled():
                raise InterruptedError("index build cancelled")
            proc.join(0.2)
            step(mid)
        second = None
        if proc.exitcode == 0:
            import contextlib
            import json

            with contextlib.suppress(OSError, ValueError):
                second = Extracted(
                    np.load(out / "part.combined.npy"),
                    np.load(out / "part.pairs.npy"),
                    [str(x) for x in json.loads((out / "part.lines.json").read_text("utf-8"))],
                    WORKER_LINE_BASE,
                )
        if second is None:  # the process failed: read its half here

            def rest(hi: int) -> None:
                if progress is not None:
                    progress(hi)

            second = extract(ar, mid, total, WORKER_LINE_BASE, progress=rest, cancelled=cancelled)
        return [first, second]
    finally:
        if proc is not None and proc.is_alive():
            proc.terminate()  # cancelled or failed here: our own child, by its handle
            proc.join(5)


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """`np.unique` by sorting in place (numpy 2's hash-based unique is several times slower on 64-bit keys)."""
    a.sort()
    if len(a) < 2:
        return a
    keep = np.empty(len(a), dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


# --------------------------------------------------------------------------------------------- segments


@dataclass
class Segment:
    """Postings of one build: distinct keys (sorted), offsets into `files` (file numbers, ascending per key)."""

    keys: np.ndarray
    offs: np.ndarray
    files: np.ndarray

    @classmethod
    def from_combined(cls, combined: np.ndarray) -> Segment:
        keys_col = combined >> np.uint64(FILE_BITS)
        files = (combined & np.uint64(FILE_MASK)).astype(np.uint32)
        if len(keys_col) == 0:
            return cls(np.empty(0, np.uint64), np.zeros(1, np.int64), files)
        starts = np.flatnonzero(keys_col[1:] != keys_col[:-1]) + 1
        offs = np.concatenate([[0], starts, [len(keys_col)]]).astype(np.int64)
        return cls(keys_col[offs[:-1]], offs, files)

    def files_of(self, keys: np.ndarray) -> np.ndarray | None:
        """Sorted distinct files holding any of `keys` (sorted); None when that is more than `POSTINGS_MAX`
        postings (the keys select almost everything)."""
        if len(keys) == 0 or len(self.keys) == 0:
            return np.empty(0, np.uint32)
        at = np.searchsorted(self.keys, keys)
        ok = at < len(self.keys)
        at = at[ok]
        at = at[self.keys[at] == keys[ok]]
        if len(at) == 0:
            return np.empty(0, np.uint32)
        lo, hi = self.offs[at], self.offs[at + 1]
        if int((hi - lo).sum()) > POSTINGS_MAX:
            return None
        if len(at) == 1:
            return np.asarray(self.files[int(lo[0]) : int(hi[0])])
        return _sorted_unique(
            np.concatenate([self.files[a:b] for a, b in zip(lo.tolist(), hi.tolist(), strict=True)])
        )


# --------------------------------------------------------------------------------------------- vocabulary


def _classic_texts(ar: Any, keys: np.ndarray, pairs: np.ndarray) -> Iterable[tuple[int, str]]:
    from deskbridge.kinds.pvf.script import classic_codec as cc
    from deskbridge.kinds.pvf.script.text import token_text

    strings = ar.strings
    table, link_text = strings.table, strings.link_text
    rec = keys[keys < EXT]
    t_all = (rec >> np.uint64(32)).astype(np.int64)
    v_all = (rec & np.uint64(0xFFFFFFFF)).astype(np.int64)
    ints = t_all == cc.T_INT
    signed = np.where(v_all >= 1 << 31, v_all - (1 << 32), v_all)
    yield from zip(rec[ints].tolist(), map(str, signed[ints].tolist()), strict=True)
    # Table strings of every string type but sections (which may print as `[tag]`), written here as
    # `record_token` + `token_text` print them (`_nkpi_texts` says why): `` `s` `` for type 7,
    # `{N=`s`}` for the others, `{N=index}` when the index is not a canonical table string.
    quoted = np.isin(t_all, [t for t in cc.STRING_TYPES if t != cc.T_SECTION])
    canonical, get = table.is_canonical, table.get
    for k, t, v, sv in zip(
        rec[quoted].tolist(),
        t_all[quoted].tolist(),
        v_all[quoted].tolist(),
        signed[quoted].tolist(),
        strict=True,
    ):
        s = get(v) if canonical(v) else None
        if s is None:
            yield k, f"{{{t}={sv}}}"
            continue
        q = "`" + s.replace("`", "``") + "`"
        yield k, (q if t == cc.T_STRING else f"{{{t}={q}}}")
    rest = ~(ints | quoted)
    for k, t, v in zip(rec[rest].tolist(), t_all[rest].tolist(), v_all[rest].tolist(), strict=True):
        tok = cc.record_token(t, v, table)
        yield k, _safe_text(tok, token_text)
    yield from link_texts(table, link_text, pairs)


def link_texts(table: Any, link_text: Any, pairs: np.ndarray) -> Iterable[tuple[int, str]]:
    """A classic string link prints as one token from two records: its text, posted under the key record
    (`pairs`: `id << 32 | key index`)."""
    from deskbridge.kinds.pvf.script import classic_codec as cc
    from deskbridge.kinds.pvf.script.text import token_text

    for pv in pairs.tolist():
        link_id, key_index = pv >> 32, pv & 0xFFFFFFFF
        k = (cc.T_LINK_KEY << 32) | key_index
        for tok in cc.link_tokens(link_id, key_index, table, link_text):
            yield k, _safe_text(tok, token_text)


_PLAIN = bytes(range(0x20, 0x7F)).replace(b"`", b"")
"""Bytes of a pool string whose quoted text is one vocabulary entry as it is, once lower-cased: printable
ASCII (no TAB or line break to cut at, `str.lower` = `bytes.lower`) without a backtick (none to double)."""


def _nkpi_entries(ar: Any, keys: np.ndarray) -> tuple[list[bytes], np.ndarray, np.ndarray]:
    """The vocabulary entries (UTF-8, in the order `_nkpi_texts` yields their texts) and their keys.

    Numbers and the quoted pool strings — nearly every key of a large archive — are written in bulk: the
    strings' spans are measured with one vectorised scan of the pool (`string_spans`), their bytes sliced
    and lower-cased without decoding, and each key's quoted and raw entries placed by position. Only
    strings that are not plain printable ASCII (and the other record types) take the per-token path. The
    third array marks the raw forms (`{N=offset}` of distinct keys: distinct from each other)."""
    from deskbridge.kinds.pvf.archive.nkpi_pools import string_spans
    from deskbridge.kinds.pvf.script import nkpi_codec as nc

    pools = ar.pools
    rec = keys[keys < EXT]
    t_all = (rec >> np.uint64(32)).astype(np.int64)
    v_all = (rec & np.uint64(0xFFFFFFFF)).astype(np.int64)
    signed = np.where(v_all >= 1 << 31, v_all - (1 << 32), v_all)
    ints = t_all == nc.T_INT
    entries: list[bytes] = list(map(b"%d".__mod__, signed[ints].tolist()))
    key_parts = [rec[ints]]
    lone_parts = [np.zeros(len(entries), dtype=bool)]
    quoted = np.isin(t_all, [t for t in nc.STRING_TYPES if t != nc.T_TAG])
    qk, qt, qv, qu = rec[quoted], t_all[quoted], signed[quoted], v_all[quoted]
    if len(qk):
        n = len(qk)
        qt_list, qv_list = qt.tolist(), qv.tolist()
        # `{N=offset}` (ASCII, lower case already): every string key's raw form.
        raw = list(map(b"{%d=%d}".__mod__, zip(qt_list, qv_list, strict=True)))
        fast = np.empty(0, dtype=np.int64)
        fast_entries: list[bytes] = []
        pool = pools.raw_a()
        ascii_compatible = _PLAIN.decode(pools.encoding, errors="replace") == _PLAIN.decode("ascii")
        in_a = np.flatnonzero(((qu & 1) == 0) & pools.valid(qu.astype(np.uint32)))
        if ascii_compatible and len(in_a):
            units = np.frombuffer(pool, dtype=np.uint8)
            pos = qu[in_a] >> 1
            lengths, _ = string_spans(units, pos)
            # Bytes that are not plain (outside printable ASCII, or a backtick), counted per string with one
            # reduceat over (start, end) pairs; the pad keeps an end at the pool's end a valid index.
            bad = np.zeros(len(units) + 1, dtype=np.uint8)
            np.greater(units - np.uint8(0x20), np.uint8(0x7E - 0x20), out=bad[:-1])
            bad[:-1] |= units == 0x60
            bounds = np.empty(2 * len(pos), dtype=np.int64)
            bounds[0::2], bounds[1::2] = pos, pos + lengths
            plain = (np.add.reduceat(bad, bounds, dtype=np.int64)[0::2] == 0) | (lengths == 0)
            fast = in_a[plain]
            low = pool.lower()  # ASCII letters only: `str.lower` of a printable-ASCII text
            p0 = pos[plain]
            texts = np.empty(len(fast), dtype=object)
            texts[:] = list(map(low.__getitem__, map(slice, p0.tolist(), (p0 + lengths[plain]).tolist())))
            ft = qt[fast]
            is_s = ft == nc.T_STRING
            out_fast = np.empty(len(fast), dtype=object)
            out_fast[is_s] = list(map(b"`%b`".__mod__, texts[is_s].tolist()))
            out_fast[~is_s] = list(
                map(b"{%d=`%b`}".__mod__, zip(ft[~is_s].tolist(), texts[~is_s].tolist(), strict=True))
            )
            fast_entries = out_fast.tolist()
        slow_mask = np.ones(n, dtype=bool)
        slow_mask[fast] = False
        slow = np.flatnonzero(slow_mask)
        slow_lists = [_entries([item])[0] for item in _nkpi_quoted_texts(pools, qk[slow], qt[slow], qv[slow])]
        counts = np.ones(n, dtype=np.int64)  # the raw entry, after the quoted one(s)
        counts[fast] += 1
        slow_counts = np.array([len(x) for x in slow_lists], dtype=np.int64)
        counts[slow] += slow_counts
        ends = np.cumsum(counts)
        firsts = ends - counts
        out = np.empty(int(ends[-1]), dtype=object)
        out[ends - 1] = raw
        out[firsts[fast]] = fast_entries
        if int(slow_counts.sum()):
            # Entry j of slow key i goes at firsts[i] + j.
            at = np.repeat(firsts[slow] - np.cumsum(slow_counts) + slow_counts, slow_counts)
            out[at + np.arange(len(at))] = [e for x in slow_lists for e in x]
        entries.extend(out.tolist())
        key_parts.append(np.repeat(qk, counts))
        lone = np.zeros(len(out), dtype=bool)
        lone[ends - 1] = True
        lone_parts.append(lone)
    rest_entries, rest_keys = _entries(_nkpi_rest_texts(pools, rec, t_all, signed, ~(ints | quoted)))
    entries.extend(rest_entries)
    key_parts.append(np.array(rest_keys, dtype=np.uint64))
    lone_parts.append(np.zeros(len(rest_entries), dtype=bool))
    return entries, np.concatenate(key_parts).astype(np.uint64), np.concatenate(lone_parts)


def _nkpi_quoted_texts(
    pools: Any, ks: np.ndarray, ts: np.ndarray, vs: np.ndarray
) -> Iterable[tuple[int, str]]:
    """The quoted texts of string keys (`record_token` + `token_text` as they would print them): `` `s` `` for
    type 6, `{N=`s`}` for the others, `{N=offset}` raw when the offset or its string is unusable."""
    from deskbridge.kinds.pvf.script import nkpi_codec as nc

    is_valid, resolve = pools.is_valid, pools.resolve
    for k, t, v in zip(ks.tolist(), ts.tolist(), vs.tolist(), strict=True):
        u = v & 0xFFFFFFFF
        if is_valid(u):
            s = resolve(u)
            if _utf8_ok(s):
                q = "`" + s.replace("`", "``") + "`"
                yield k, (q if t == nc.T_STRING else f"{{{t}={q}}}")
                continue
        yield k, f"{{{t}={v}}}"


def _nkpi_rest_texts(
    pools: Any, rec: np.ndarray, t_all: np.ndarray, signed: np.ndarray, rest: np.ndarray
) -> Iterable[tuple[int, str]]:
    from deskbridge.kinds.pvf.script import nkpi_codec as nc
    from deskbridge.kinds.pvf.script.text import token_text, typed_token

    for k, t, v in zip(rec[rest].tolist(), t_all[rest].tolist(), signed[rest].tolist(), strict=True):
        yield k, _safe_text(nc.record_token(t, v, pools), token_text)
        if t in nc.STRING_TYPES:
            yield k, token_text(typed_token(t, v))  # a repeat of the string at another offset prints raw


def _utf8_ok(s: str) -> bool:
    """`nkpi_codec._string_ok`: a string holding lone surrogates (undecodable pool bytes) prints raw."""
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _safe_text(tok: Any, token_text: Callable[[Any], str]) -> str:
    try:
        return token_text(tok)
    except ValueError:
        return ""


def _entries(items: Iterable[tuple[int, str]]) -> tuple[list[bytes], list[int]]:
    """The entries (UTF-8) of each `(key, text)` and their keys, in order."""
    entries: list[bytes] = []
    keys: list[int] = []
    add_entry, add_key = entries.append, keys.append
    for k, text in items:
        if text.isascii() and text.isprintable():  # numbers, tags, ASCII strings: one piece, lower case
            if text:
                add_entry(text.lower().encode("ascii"))
                add_key(k)
            continue
        for p in pieces(text):
            add_entry(p.encode("utf-8", "surrogatepass"))
            add_key(k)
    return entries, keys


def _encoded(encoded: list[bytes], base: int) -> tuple[bytes, np.ndarray]:
    """(the UTF-8 entries, each followed by a line break; their byte offsets from `base`)."""
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)) + 1
    starts = np.full(len(encoded), base, dtype=np.int64)
    if len(encoded) > 1:
        starts[1:] += np.cumsum(lengths[:-1])
    return (b"\n".join(encoded) + b"\n" if encoded else b""), starts


@dataclass
class Vocabulary:
    """Every distinct entry (a case-folded piece of some token's text) in one UTF-8 byte string, with the
    keys it belongs to (`starts`: byte offsets; entry i's keys are `keys[key_offs[i]:key_offs[i + 1]]`).
    Distinct, because a lookup scans the whole string and classic archives print the same text for many
    records (a third of the entries: numbers under several types, repeated strings). Bytes, not a `str`: a cached reopen reads the file as it is instead
    of decoding tens of MB, and a UTF-8 needle found in UTF-8 bytes always starts on a character (no byte of
    one character's encoding is the first byte of another's), so `bytes.find` finds what `str.find` would."""

    blob: bytes
    starts: np.ndarray
    keys: np.ndarray
    key_offs: np.ndarray

    @classmethod
    def build(cls, items: Iterable[tuple[int, str]], base: int = 0) -> Vocabulary:
        entries, keys = _entries(items)
        return cls.of_entries(entries, np.array(keys, np.uint64), base)

    @classmethod
    def of_entries(
        cls, entries: list[bytes], keys: np.ndarray, base: int = 0, lone: np.ndarray | None = None
    ) -> Vocabulary:
        """The vocabulary of UTF-8 `entries` (entry i belongs to `keys[i]`): each distinct entry once, in
        the order of its first occurrence, with its keys in the order they came. `lone` marks entries the
        caller knows to be distinct from each other (nkpi's raw `{N=offset}` forms, half the entries of a
        large archive): they are only looked up among the others, never added to the dict."""
        from itertools import repeat

        n = len(entries)
        if lone is None:
            lone = np.zeros(n, dtype=bool)
        others = np.flatnonzero(~lone)
        alone = np.flatnonzero(lone)
        other_list = list(map(entries.__getitem__, others.tolist()))
        # Each entry → where it first occurs, in one dict built by C loops: written back to front, the first
        # occurrence is the last write. The first occurrences are the distinct entries, in order.
        first_at = dict(zip(reversed(other_list), reversed(others.tolist()), strict=True))
        firsts = np.arange(n, dtype=np.int64)
        firsts[others] = np.fromiter(map(first_at.__getitem__, other_list), dtype=np.int64, count=len(others))
        if len(alone):
            lone_list = list(map(entries.__getitem__, alone.tolist()))
            found = np.fromiter(
                map(first_at.get, lone_list, repeat(-1, len(alone))), dtype=np.int64, count=len(alone)
            )
            hit = np.flatnonzero(found >= 0)
            if len(hit):  # a lone entry that also occurs among the others: every occurrence → the earliest
                earliest = np.minimum(alone[hit], found[hit])
                remap = np.arange(n, dtype=np.int64)
                remap[found[hit]] = earliest
                firsts[others] = remap[firsts[others]]
                firsts[alone[hit]] = earliest
        del first_at
        heads = np.flatnonzero(firsts == np.arange(n))
        distinct = list(map(entries.__getitem__, heads.tolist()))
        order = np.searchsorted(heads, firsts)
        blob, starts = _encoded(distinct, base)
        key_offs = np.zeros(len(distinct) + 1, dtype=np.int64)
        np.cumsum(np.bincount(order, minlength=len(distinct)), out=key_offs[1:])
        by_entry = np.argsort(order, kind="stable")
        return cls(blob, starts, np.asarray(keys, np.uint64)[by_entry], key_offs)

    def extended(self, items: Iterable[tuple[int, str]]) -> Vocabulary:
        """This vocabulary with more entries (texts that became possible after a save; an entry already
        present is added again, which only costs its bytes)."""
        more = Vocabulary.build(items, len(self.blob))
        if not more.blob:
            return self
        return Vocabulary(
            self.blob + more.blob,
            np.concatenate([np.asarray(self.starts), more.starts]),
            np.concatenate([np.asarray(self.keys), more.keys]),
            np.concatenate([np.asarray(self.key_offs), more.key_offs[1:] + self.key_offs[-1]]),
        )

    def keys_containing(self, text: str) -> np.ndarray | None:
        """Sorted distinct keys of the entries containing `text`; None when more than `ENTRY_MATCH_MAX`
        entries do."""
        blob = self.blob
        piece = text.encode("utf-8", "surrogatepass")
        # One pass over the blob (it is tens of MB): the limit counts what `bytes.count` would (occurrences
        # that do not overlap, leftmost first), kept alongside the overlapping hits the entries need, so a
        # piece in too many entries stops the scan early instead of being counted first and found after.
        hits = []
        find, size = blob.find, len(piece)
        counted, free_at = 0, 0
        pos = find(piece)
        while pos >= 0:
            if pos >= free_at:
                counted += 1
                if counted > ENTRY_MATCH_MAX:
                    return None
                free_at = pos + size
            hits.append(pos)
            pos = find(piece, pos + 1)
        if not hits:
            return np.empty(0, np.uint64)
        idx = _sorted_unique(np.searchsorted(self.starts, np.array(hits, dtype=np.int64), side="right") - 1)
        lo, hi = self.key_offs[idx], self.key_offs[idx + 1]
        counts = hi - lo
        # The keys of every entry found, gathered without a loop: position j of entry e's run is lo[e] + j.
        at = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        return _sorted_unique(self.keys[at])


def vocabulary(ar: Any, keys: np.ndarray, pairs: np.ndarray, lines: dict[int, list[str]]) -> Vocabulary:
    """The vocabulary of the distinct `keys` of an archive (`lines`: line_base → that build's line pieces)."""
    items: list[Iterable[tuple[int, str]]] = []
    if ar.family == "classic":
        entries, key_list = _entries(_classic_texts(ar, keys, pairs))
        key_parts = [np.array(key_list, dtype=np.uint64)]
        lone = np.zeros(len(entries), dtype=bool)
        items.append([(HEADER_KEY, "#PVF_File")])
    else:
        entries, nkpi_keys, lone = _nkpi_entries(ar, keys)
        key_parts = [nkpi_keys]
    for base, found in lines.items():
        items.append(list(zip(range(base, base + len(found)), found, strict=True)))  # `base` bound now

    def chain() -> Iterable[tuple[int, str]]:
        for it in items:
            yield from it

    more, more_keys = _entries(chain())
    entries.extend(more)
    key_parts.append(np.array(more_keys, dtype=np.uint64))
    lone = np.concatenate([lone, np.zeros(len(more), dtype=bool)])
    return Vocabulary.of_entries(entries, np.concatenate(key_parts), lone=lone)
