"""Lazily read nkpi documents (`scripting/lazy_nkpi.py`) equal whole-file documents: the same tree, values
and text after the same writes — on random record streams over pools that hold the same string at several
offsets (a later use prints raw), and on every script of a synthetic nkpi archive; the tag prefilter finds
exactly the pool offsets that read as the tag, and the text budget still decides by the whole decode."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from test_script_lazy import _edit, _same

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.nkpi import DATA_SCRIPT
from deskbridge.kinds.pvf.archive.nkpi_pools import PoolKeys, StringPools
from deskbridge.kinds.pvf.script import nkpi_codec as nc
from deskbridge.kinds.pvf.script.text import Kind, int_token
from deskbridge.kinds.pvf.scripting import lazy_nkpi, model
from deskbridge.kinds.pvf.synth import synth

A_STRINGS = [
    "",
    "[name]",
    "[price]",
    "[/price]",
    "[if equip]",
    "[/if equip]",
    "[PRICE]",
    "[price]",  # the same string at a second offset: a later use of it prints raw
    "oddword",
    "abc",
    "x[price]",  # offset + 2 reads `[price]` too (an offset may point into a string)
    "not a tag]",
    "[usable job]",
    "[/usable job]",
]
W_STRINGS = ["", "[price]", "abc", "[Price]", "Šwide"]


def _pools(last_nul: bool = True) -> tuple[StringPools, list[int]]:
    """Pools of `A_STRINGS` and `W_STRINGS` and the magic offsets of their strings (and of a suffix)."""
    a = bytearray()
    offs = []
    for s in A_STRINGS:
        offs.append(len(a) * 2)
        if s == "x[price]":
            offs.append((len(a) + 1) * 2)
        a += s.encode() + b"\0"
    if not last_nul:
        a += b"[price]"  # the pool's last string without its NUL
        offs.append((len(a) - 7) * 2)
    w = bytearray()
    for s in W_STRINGS:
        offs.append(len(w) + 1)
        w += s.encode("utf-16-le") + b"\0\0"
    return StringPools(b"\0" * 8, bytes(a), bytes(w), PoolKeys(0, 0, 0, 0), "utf-8"), offs


POOLS, OFFSETS = _pools()
TAG_OFFSETS = [o for o in OFFSETS if o] + [10_000_001, 3]  # past the pools; into the middle of a string

record = st.one_of(
    st.tuples(st.just(nc.T_TAG), st.sampled_from(TAG_OFFSETS)),
    st.tuples(st.sampled_from([5, 6, 7, 8, 10]), st.sampled_from([*OFFSETS, 10_000_003])),
    st.tuples(st.just(nc.T_INT), st.integers(-(1 << 31), (1 << 31) - 1)),
    st.tuples(st.just(nc.T_FLOAT), st.sampled_from([0x3F800000, 0x7FC00000, 0x41200000, 0x7F800000, 0])),
    st.tuples(st.sampled_from([1, 4, 9, 11]), st.integers(-5, 5)),
)


def _payload(recs: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack("<Bi", t, v - (1 << 32) if v >= 1 << 31 else v) for t, v in recs)


def _docs(data: bytes, pools: StringPools = POOLS) -> tuple[model.Document, model.Document]:
    full = model.Document(nc.to_tokens(data, pools), header=None, record_width=None)
    lz = lazy_nkpi.nkpi_document(data, pools, record_width=None)
    assert lz is not None
    return full, lz


NAMES = ["price", "PRICE", "if equip", "usable job", "name", "if equip/price", "oddword", "/price"]


@settings(max_examples=300, deadline=None)
@given(st.lists(record, max_size=60), st.sampled_from(NAMES), st.integers(0, 1000))
def test_a_lazy_nkpi_document_equals_the_whole_file_document(recs: list, name: str, seed: int) -> None:
    data = _payload(recs)
    full, lz = _docs(data)
    # reads first (lazy values are decoded as they are read)
    assert [s.values for s in lz.find(name)] == [s.values for s in full.find(name)]
    _same(full, lz)
    full, lz = _docs(data)
    _edit(full, name, seed)
    _edit(lz, name, seed)  # writes before the values were ever read
    _same(full, lz)
    assert lz.source_tokens == nc.to_tokens(data, POOLS)
    assert nc.compile_text(lz.text(), POOLS, original=data) == nc.compile_text(
        full.text(), POOLS, original=data
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(record, max_size=60), st.sampled_from(NAMES), st.integers(0, 1000), st.booleans())
def test_a_lazy_nkpi_document_written_before_its_tree_is_built_equals_the_whole_file_one(
    recs: list, name: str, seed: int, read_all: bool
) -> None:
    """`LazyDocument.tokens()` while the tree is unbuilt (what `file.write` of a price-raise prints)."""
    data = _payload(recs)
    full, lz = _docs(data)
    pairs = list(zip(full.find(name), lz.find(name), strict=True))
    for i, (a, b) in enumerate(pairs):
        if i % 3 == 2 and not read_all:
            continue  # never read on the lazy side
        assert b.values == a.values
        if i % 3 == 0:
            for sec in (a, b):
                if sec.values:
                    sec.values[0] = int_token(seed + i)
                else:
                    sec.values.append(int_token(seed))
    assert lz.tokens() == full.tokens()
    assert lz.text() == full.text()
    _same(full, lz)


def _brute_patterns(pools: StringPools, want: str) -> set[bytes]:
    """Every magic offset of the pools whose type-3 record reads as a section tag named `want`."""
    out = set()
    for off in [*range(0, 2 * pools.size_a, 2), *range(1, pools.size_w, 2)]:
        if not pools.is_valid(off):
            continue
        tok = nc.record_token(nc.T_TAG, off, pools)
        if tok.kind is Kind.SECTION and model.tag_info(str(tok.value))[3] == want:
            out.add(bytes([nc.T_TAG]) + struct.pack("<I", off))
    return out


@pytest.mark.parametrize("last_nul", [True, False])
@pytest.mark.parametrize("want", ["price", "name", "if equip", "/price", "usable job", "abc", "nothing"])
def test_the_tag_prefilter_finds_exactly_the_offsets_that_read_as_the_tag(last_nul: bool, want: str) -> None:
    pools, _ = _pools(last_nul)
    found = lazy_nkpi.tag_patterns(pools, want)
    assert found is not None
    assert set(found) == _brute_patterns(pools, want)
    if want == "price":  # both cases, both pools, the string at a second offset and inside another
        assert len(found) == 6 + (0 if last_nul else 1)


def test_the_tag_prefilter_cannot_tell_names_whose_case_bytes_do_not_decide() -> None:
    # U+212A KELVIN SIGN lower-cases to `k`: a name with `k` (or any non-ASCII name) is not searched.
    pools, _ = _pools()
    assert lazy_nkpi.tag_patterns(pools, "kind") is None
    assert lazy_nkpi.tag_patterns(pools, "šwide") is None
    data = _payload([(nc.T_TAG, OFFSETS[2])])
    lz = lazy_nkpi.nkpi_document(data, pools, record_width=None)
    assert lz is not None and not lz.lacks("kind")  # then the tags answer
    assert lz.find("kind") == []


def test_the_prefilter_answers_without_the_tags_only_where_no_whole_record_names_the_tag() -> None:
    """The record of `[price]` (type 3 + offset 2) split over two records is no tag; a file with the record
    finds it; a file without answers `[]` with its tags never scanned."""
    price = A_STRINGS.index("[price]")
    off = OFFSETS[price]
    pat = bytes([nc.T_TAG]) + struct.pack("<I", off)
    straddle = [(nc.T_INT, int.from_bytes(b"\0" + pat[:3], "little")), (pat[3] | pat[4] << 8, 0)]
    assert pat in _payload(straddle) and _payload(straddle).find(pat) % 5
    for recs, want in (
        ([(0, 1), (nc.T_TAG, OFFSETS[1]), (0, 7)], []),
        (
            [(0, 1), (nc.T_TAG, off), (0, 42), (2, 0x3F800000)],
            [[int_token(42), nc.record_token(2, 0x3F800000, POOLS)]],
        ),
    ):
        data = _payload(recs)
        full, lz = _docs(data)
        assert [s.values for s in lz.find("price")] == [s.values for s in full.find("price")] == want
        assert (lz._shape_of is None) == (want == [])
        _same(full, lz)


def test_a_file_whose_text_could_pass_the_budget_is_decoded_whole() -> None:
    """With a pool string longer than the text budget allows per record, a file of such records could
    exceed it: `nkpi_document` leaves it to the whole decode (which refuses it with `PVF_CORRUPT`)."""
    long = "y" * (1 << 17)
    pools = StringPools(b"\0" * 8, b"\0" + long.encode() + b"\0", b"", PoolKeys(0, 0, 0, 0), "utf-8")
    data = _payload([(nc.T_STRING, 2)] * 10)
    assert lazy_nkpi.nkpi_document(data, pools, record_width=None) is None
    with pytest.raises(BridgeError):
        nc.to_tokens(_payload([(nc.T_STRING, 2)] * 20), pools)
    assert lazy_nkpi.nkpi_document(_payload([(0, 1)] * 3), POOLS, record_width=None) is not None
    with pytest.raises(BridgeError):
        lazy_nkpi.nkpi_document(b"\0" * 7, POOLS, record_width=None)  # not whole records


def test_every_script_of_an_nkpi_archive_reads_alike_lazily(tmp_path: Path) -> None:
    path = tmp_path / "n.pvf"
    synth(path, family="nkpi", files=300, seed=5)
    ar = open_archive(path)
    n = 0
    for p in ar.paths():
        if ar.data_type(p) != DATA_SCRIPT:
            continue
        data = ar.read(p)
        width = 2 if p.endswith(".lst") else None
        full = model.Document(nc.to_tokens(data, ar.pools), header=None, record_width=width)
        lz = lazy_nkpi.archive_document(ar, p, record_width=width)
        assert lz is not None
        for name in ("price", "name", "if equip/price"):
            assert [s.values for s in lz.find(name)] == [s.values for s in full.find(name)]
        _same(full, lz)
        assert lz.text() == ar.read_text(p)
        n += 1
    assert n > 200
    ar.close()


# The reads and writes of a run in every shape the documents have: sections by name, nested paths, string
# and number values, a set, a created section, a delete, writes before and after the tree is built.
MIXED = """
let n = 0;
const out = [];
for (const f of pvf.glob("**/*")) {
  if (f.type !== 1) continue;
  const doc = f.parse();
  const prices = doc.sections("price");
  out.push(prices.length, doc.sections("if equip/price").length, doc.sections("nothing").length);
  for (const s of doc.sections("name")) out.push(JSON.stringify(s.values()));
  let changed = false;
  for (const s of prices) {
    const v = s.getValue(0);
    if (typeof v === "number" && v < 3000) { s.set(3000, 0); changed = true; }
  }
  if (n % 7 === 3 && doc.sections("weight").length) { doc.section("weight").delete(); changed = true; }
  if (n % 11 === 5) { doc.appendSection("added", [n]); changed = true; }
  if (changed) f.write(doc);
  n++;
}
pvf.log(JSON.stringify(out));
"""


def test_a_run_over_lazy_nkpi_documents_sends_what_whole_decodes_send(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's host in this process over a synthetic nkpi archive: the same logs and change frames
    (the texts the parent compiles) with lazy documents as with every document decoded whole."""
    from deskbridge.kinds.pvf.scripting import host as host_mod

    path = tmp_path / "n.pvf"
    synth(path, family="nkpi", files=400, seed=9)

    class Frames:
        def __init__(self) -> None:
            self.frames: list[dict] = []

        def send(self, msg: dict) -> None:
            self.frames.append(msg)

    def run() -> tuple[list[dict], int]:
        job = {"path": str(path), "options": {}, "overlay": {}, "pool_tail": None, "source": MIXED}
        job |= {"filesets": {}, "fileset_writes": False, "js_mem_bytes": 512 << 20, "cpu_s": 600}
        job |= {"as_bytes": None, "max_changes": 10_000, "log_max_lines": 1000, "docs_live": 64}
        job |= {"log_max_bytes": 1 << 22}
        pipe = Frames()
        host = host_mod.Host(job, pipe)  # type: ignore[arg-type]
        host.run()
        kept = [f for f in pipe.frames if f.get("t") in ("change", "log")]
        return kept, sum(1 for d in (host.docs or {}).values() if isinstance(d, lazy_nkpi.NkpiDocument))

    lazy_frames, lazy_docs = run()
    assert lazy_docs > 0  # the run read lazy documents
    monkeypatch.setattr(lazy_nkpi, "archive_document", lambda *a, **k: None)
    whole_frames, whole_docs = run()
    assert whole_docs == 0
    assert sum(1 for f in lazy_frames if f["t"] == "change") > 20
    assert lazy_frames == whole_frames


def test_strings_added_to_the_pools_are_seen_by_the_prefilter_and_the_budget() -> None:
    """The pools' facts are per state: a `[price]` appended after a first search is found by the next, and a
    long string appended makes a file of many string records a whole decode."""
    pools, _ = _pools()
    before = lazy_nkpi.tag_patterns(pools, "price")
    assert before is not None
    pools.append_raw(b"[PriCe]" + b"\0", b"")  # as the worker appends the workspace's unsaved strings
    after = lazy_nkpi.tag_patterns(pools, "price")
    assert after is not None and len(after) == len(before) + 1
    assert set(after) == _brute_patterns(pools, "price")
    data = _payload([(nc.T_STRING, 2)] * 4000)
    assert lazy_nkpi.nkpi_document(data, pools, record_width=None) is not None
    pools.add("z" * 1000)
    assert lazy_nkpi.nkpi_document(data, pools, record_width=None) is None
