"""The token-postings content index finds exactly what decompiling every file and matching its lines finds.

The slow path is the definition: every file's `read_text`, `matching_lines` with the case-folded query, in
`paths()` order. The index must return the same files, lines and snippets in the same order — for queries
inside one token, across tokens (TABs), across lines, in text files, with any letter case — on synthetic
archives of both families, also after saves replaced, added and removed files (`refresh`).
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.base import norm_path
from deskbridge.kinds.pvf.search import ContentIndex, DiskText, matching_lines
from deskbridge.kinds.pvf.synth import synth

FIXED = [
    "equipment item name_1",
    "[physical attack]",
    "[price]",
    "`[belt]`\t3",
    "[name]\n\t<",
    "#pvf_file",
    "PVF_File",
    "level property",
    "\t\t\t",
    "0.5",
    "{6=`up`}",
    "name_1`",
    "<0::name_",
    ">",
    "no such text anywhere 9z",
    "破舊的",
    "3\t4",
    ".equ",
    "` 1",
]


def _text(ar: Any, path: str) -> str | None:
    try:
        return ar.read_text(path)
    except BridgeError:
        return None


def slow(ar: Any, query: str) -> list[tuple[str, list[dict[str, Any]]]]:
    folded = query.casefold()
    out = []
    for p in ar.paths():
        text = _text(ar, p)
        lines = matching_lines(text, folded) if text else []
        if lines:
            out.append((p, lines))
    return out


def fast(
    index: ContentIndex, query: str, overlay: set[str] = frozenset()
) -> list[tuple[str, list[dict[str, Any]]]]:
    folded = query.casefold()
    out = []
    after = 0
    while True:
        batch = index.candidates(query, after, 7)  # small pages: the cursor logic is exercised too
        if not batch:
            return out
        for row, path in batch:
            after = row
            if norm_path(path) in overlay:
                continue
            text = index.text(path)
            lines = matching_lines(text, folded) if text else []
            if lines:
                out.append((path, lines))


def _build(tmp: Path, archive: Path) -> tuple[ContentIndex, Any]:
    index = ContentIndex(tmp / "idx", "x" * 64)
    index.build(archive, {})
    ar = open_archive(archive)
    index.reader = DiskText(ar, threading.RLock())
    return index, ar


def _queries(ar: Any, rng: random.Random, n: int) -> list[str]:
    """Substrings of real texts — inside tokens, across TABs and lines — with their letter case changed."""
    texts = [t for t in (_text(ar, p) for p in ar.paths()) if t]
    out = []
    for _ in range(n):
        t = rng.choice(texts)
        if rng.random() < 0.7:  # mostly inside one line (a query across a line break never matches)
            t = rng.choice([line for line in t.splitlines() if len(line) >= 3] or [t])
        a = rng.randrange(len(t))
        q = t[a : a + rng.randint(3, 24)]
        if len(q) >= 3:
            out.append("".join(c.upper() if rng.random() < 0.3 else c for c in q))
    return out


@pytest.fixture(scope="module", params=["classic", "nkpi"])
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[ContentIndex, Any]:
    tmp = tmp_path_factory.mktemp(f"postings-{request.param}")
    archive = tmp / "a.pvf"
    synth(archive, family=request.param, files=160, seed=3)
    index, ar = _build(tmp, archive)
    yield index, ar
    ar.close()


def test_fixed_and_sampled_queries_equal_the_slow_path(built: tuple[ContentIndex, Any]) -> None:
    index, ar = built
    queries = FIXED + _queries(ar, random.Random(5), 60)
    found_any = 0
    for q in queries:
        want = slow(ar, q)
        assert fast(index, q) == want, q
        found_any += bool(want)
    assert found_any > len(queries) // 2  # the corpus really exercises hits, not only misses


def test_a_cached_reopen_answers_the_same(built: tuple[ContentIndex, Any]) -> None:
    index, _ar = built
    again = ContentIndex(index.root, index.sha256)
    assert again.state == "ready" and again.cached
    again.reader = index.reader
    for q in FIXED[:6]:
        assert fast(again, q) == fast(index, q)


def test_refresh_after_a_save_replaces_adds_and_removes_rows(tmp_path: Path) -> None:
    archive = tmp_path / "a.pvf"
    synth(archive, family="classic", files=120, seed=4)
    index, ar = _build(tmp_path, archive)
    scripts = [p for p in ar.paths() if p.endswith(".equ")]
    changed, removed = scripts[0], scripts[1]
    old_text = ar.read_text(changed)
    ar.stage_text(changed, old_text.replace("[price]", "[price]\n\t`zebra quokka`", 1))
    ar.stage_text("equipment/new_one.equ", "#PVF_File\n[name2]\n\t`zebra quokka too`\n")
    removed_text = ar.read_text(removed)
    ar.stage(removed, None)
    staged = {k: ar.file_info(k).path if v is not None else None for k, v in ar.staged().items()}
    assert "stringtable.bin" in staged  # the new strings: a save changes it too
    ar.save()
    index.refresh(
        {k: (shown, None if shown is None else _text(ar, shown)) for k, shown in staged.items()},
        "y" * 64,
    )
    # Rows a save replaced come after the others (as they always did), so compare without order.
    assert sorted(fast(index, "ZEBRA quokka")) == sorted(slow(ar, "ZEBRA quokka"))
    assert {p for p, _ in fast(index, "zebra quokka")} == {
        changed,
        "equipment/new_one.equ",
        "stringtable.bin",
    }
    assert removed not in {p for p, _ in fast(index, "[price]")}
    unique = next(line for line in removed_text.splitlines() if "name_" in line).strip()
    assert sorted(fast(index, unique)) == sorted(slow(ar, unique))
    assert removed not in [p for p, _ in fast(index, unique)]
    # the re-keyed index reopens with the same rows
    again = ContentIndex(tmp_path / "idx", "y" * 64)
    again.reader = index.reader
    assert fast(again, "zebra quokka") == fast(index, "zebra quokka")
    ar.close()


def test_a_changed_str_file_widens_link_texts(tmp_path: Path) -> None:
    archive = tmp_path / "a.pvf"
    synth(archive, family="classic", files=120, seed=6)
    index, ar = _build(tmp_path, archive)
    strs = [p for p in ar.paths() if p.endswith(".str")]
    target = next(p for p in strs if ">" in ar.read_text(p))
    text = ar.read_text(target)
    first = next(line for line in text.splitlines() if ">" in line)
    key = first.split(">", 1)[0]
    ar.stage_text(target, text.replace(first, f"{key}>Brand New Wombat", 1))
    ar.save()
    index.refresh({norm_path(target): (target, ar.read_text(target))}, "z" * 64)
    want = slow(ar, "new wombat")
    assert len(want) >= 2  # the .str file itself and a script whose link shows the new text
    assert sorted(fast(index, "new wombat")) == sorted(want)
    ar.close()


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(family=st.sampled_from(["classic", "nkpi"]), seed=st.integers(0, 10_000), qseed=st.integers(0, 10_000))
def test_property_generated_archives(
    tmp_path_factory: pytest.TempPathFactory, family: str, seed: int, qseed: int
) -> None:
    tmp = tmp_path_factory.mktemp("prop")
    archive = tmp / "a.pvf"
    synth(archive, family=family, files=40, seed=seed)
    index, ar = _build(tmp, archive)
    try:
        for q in _queries(ar, random.Random(qseed), 12) + FIXED[:4]:
            assert fast(index, q) == slow(ar, q), q
    finally:
        ar.close()


def test_the_fts5_index_of_earlier_versions_is_removed(tmp_path: Path) -> None:
    old = tmp_path / f"{'q' * 64}.sqlite"
    old.write_bytes(b"SQLite format 3\0")
    keep = tmp_path / f"{'r' * 64}.sqlite"  # another archive's: not ours to remove
    keep.write_bytes(b"SQLite format 3\0")
    index = ContentIndex(tmp_path, "q" * 64)
    assert index.state == "missing" and not old.exists() and keep.exists()


def test_an_index_of_an_earlier_layout_is_rebuilt_not_read(tmp_path: Path) -> None:
    """Version 3 kept `paths.json` and character offsets into the vocabulary: read as version 4, every
    candidate would be wrong. Its meta says so, so it is not loaded and a build replaces it."""
    import json

    archive = tmp_path / "a.pvf"
    synth(archive, family="classic", files=40, seed=3)
    index, ar = _build(tmp_path, archive)
    want = fast(index, FIXED[0])
    meta_path = index.path / "meta.json"
    meta = json.loads(meta_path.read_text("utf-8"))
    meta["version"] = 3  # any earlier version: the layout changed in 4 and 5
    meta_path.write_text(json.dumps(meta), "utf-8")
    (index.path / "paths.json").write_text(json.dumps(ar.paths()), "utf-8")
    old = ContentIndex(index.root, index.sha256)
    assert old.state == "missing" and not old.cached
    old.build(archive, {})
    old.reader = index.reader
    assert old.state == "ready" and not (old.path / "paths.json").exists()
    assert fast(old, FIXED[0]) == want
    ar.close()


@pytest.mark.parametrize("family", ["classic", "nkpi"])
def test_a_two_process_build_answers_as_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    """Large archives are read in two processes (the second half in a spawned one), stored as two
    segments: every query answers exactly as the slow path, in row order across the halves."""
    from deskbridge.kinds.pvf import postings

    archive = tmp_path / "a.pvf"
    synth(archive, family=family, files=120, seed=8)
    monkeypatch.setattr(postings, "PARALLEL_MIN_FILES", 0)
    monkeypatch.setenv(postings.WORKERS_ENV, "1")
    index, ar = _build(tmp_path, archive)
    try:
        assert index._meta["segments"] == 2
        for q in FIXED + _queries(ar, random.Random(9), 20):
            assert fast(index, q) == slow(ar, q), q
    finally:
        ar.close()


def test_a_failed_second_process_leaves_its_half_to_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deskbridge.kinds.pvf import postings

    archive = tmp_path / "a.pvf"
    synth(archive, family="nkpi", files=80, seed=2)
    monkeypatch.setattr(postings, "PARALLEL_MIN_FILES", 0)
    monkeypatch.setenv(postings.WORKERS_ENV, "1")
    ar = open_archive(archive)
    try:
        total = len(ar.paths())
        # the child opens a file that is not there and exits with an error
        parts = postings.extract_parallel(ar, tmp_path / "missing.pvf", {}, total, tmp_path / "work")
        whole = postings.extract(ar, 0, total)
    finally:
        ar.close()
    assert len(parts) == 2
    combined = np.sort(np.concatenate([p.combined for p in parts]))
    lines = {p.line_base: p.lines for p in parts}
    assert len(combined) == len(whole.combined)

    # the same postings, line pieces keyed by each half's own base
    def as_text(c: np.ndarray, base_of: dict[int, list[str]]) -> list[tuple[str, int]]:
        out = []
        for v in c.tolist():
            key, f = v >> postings.FILE_BITS, v & postings.FILE_MASK
            if key >= postings.LINE_BASE:
                base = max(b for b in base_of if b <= key)
                out.append((base_of[base][key - base], f))
            else:
                out.append((str(key), f))
        return sorted(out)

    assert as_text(combined, lines) == as_text(whole.combined, {whole.line_base: whole.lines})


def _per_token_entries(ar: Any, keys: np.ndarray) -> tuple[list[bytes], list[int]]:
    """The oracle for the bulk writer: every key's texts one `Token` text at a time, in the writer's order
    (numbers, then each quoted string key's quoted text and its raw form, then the other records)."""
    from deskbridge.kinds.pvf import postings
    from deskbridge.kinds.pvf.script import nkpi_codec as nc

    rec = keys[keys < postings.EXT]
    t_all = (rec >> np.uint64(32)).astype(np.int64)
    v_all = (rec & np.uint64(0xFFFFFFFF)).astype(np.int64)
    signed = np.where(v_all >= 1 << 31, v_all - (1 << 32), v_all)
    ints = t_all == nc.T_INT
    items: list[tuple[int, str]] = [(int(k), str(v)) for k, v in zip(rec[ints], signed[ints], strict=True)]
    quoted = np.isin(t_all, [t for t in nc.STRING_TYPES if t != nc.T_TAG])
    for k, t, v in zip(rec[quoted], t_all[quoted], signed[quoted], strict=True):
        items += postings._nkpi_quoted_texts(ar.pools, np.array([k]), np.array([t]), np.array([v]))
        items.append((int(k), f"{{{t}={v}}}"))
    items += postings._nkpi_rest_texts(ar.pools, rec, t_all, signed, ~(ints | quoted))
    return postings._entries(items)


def test_bulk_nkpi_vocabulary_entries_equal_the_per_token_texts(tmp_path: Path) -> None:
    """Plain-ASCII pool strings are sliced from the pool in bulk; every other string (upper case folded,
    backticks doubled, TABs and line breaks cut, non-ASCII, undecodable bytes printed raw, bad offsets) goes
    through the per-token texts — together they must write exactly the entries, in the same order."""
    from deskbridge.kinds.pvf import postings
    from deskbridge.kinds.pvf.script import nkpi_codec as nc

    archive = tmp_path / "a.pvf"
    synth(archive, family="nkpi", files=160, seed=3)
    ar = open_archive(archive)
    try:
        pools = ar.pools
        extra = [
            "Plain Upper",
            "back`tick",
            "",
            "tab\there",
            "line\nbreak",
            "破舊的",
            "x" * 300,
            "~!@#$%^&*()",
        ]
        offsets = [pools.add(s) for s in extra]
        tail = pools.size_a
        pools.append_raw(b"caf\xc3\xa9\0\xff\xfeoops\0bell\x07\0del\x7f\0end-no-nul", b"")
        offsets += [2 * tail, 2 * (tail + 6), 2 * (tail + 12), 2 * (tail + 18), 2 * (tail + 23)]
        offsets += [2 * (pools.size_a + 5), pools.size_w + 7]  # past the end of each pool: raw
        index = ContentIndex(tmp_path / "idx", "x" * 64)
        index.build(archive, {})
        built_keys = np.concatenate([np.asarray(seg.keys) for seg in index._segments])
        mine = [(t << 32) | (o & 0xFFFFFFFF) for o in offsets for t in (nc.T_STRING, nc.T_REF8, nc.T_BLOCK5)]
        keys = np.unique(np.concatenate([built_keys, np.array(mine, dtype=np.uint64)]))
        entries, entry_keys, lone = postings._nkpi_entries(ar, keys)
        want, want_keys = _per_token_entries(ar, keys)
        assert entries == want
        assert entry_keys.tolist() == want_keys
        assert b"`plain upper`" in entries and b"`back``tick`" in entries and b"{8=`caf\xc3\xa9`}" in entries
        # The raw forms are marked distinct from each other, not from the rest: an offset past the pool prints
        # raw as its quoted text too, and a text file's line can hold `{8=…}`; the vocabulary is the same.
        assert lone.sum() and any(e.startswith(b"{8=") for e in np.array(entries, dtype=object)[~lone])
        lines = [b"{8=12}", entries[int(np.flatnonzero(lone)[3])]]
        entries += lines
        entry_keys = np.concatenate([entry_keys, np.array([1 << 41, 1 << 41], dtype=np.uint64)])
        lone = np.concatenate([lone, [False, False]])
        a = postings.Vocabulary.of_entries(entries, entry_keys, lone=lone)
        b = postings.Vocabulary.of_entries(entries, entry_keys)
        assert (a.blob, a.starts.tolist(), a.keys.tolist(), a.key_offs.tolist()) == (
            b.blob,
            b.starts.tolist(),
            b.keys.tolist(),
            b.key_offs.tolist(),
        )
        assert len(b.starts) < len(entries) - 1  # there were duplicates to merge
    finally:
        ar.close()
