"""Lazily read script documents (`scripting/lazy.py`) equal whole-file documents: the same tree, the same
values, the same text after the same writes — on random record streams (tags, end tags, odd tags, links,
typed values) and on every script of synthetic archives of both families; and the primitive bridge of the
hot operations gives a script the same answers and the same plan as the JSON bridge."""

from __future__ import annotations

import gc
import json
import shutil
import struct
import sys
import weakref
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from script_harness import session

from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.script import classic_codec as cc
from deskbridge.kinds.pvf.script.text import int_token, print_tokens
from deskbridge.kinds.pvf.scripting import lazy, model
from deskbridge.kinds.pvf.strings.stringtable import StringTable
from deskbridge.kinds.pvf.synth import synth

ENTRIES = [
    b"[name]",
    b"[price]",
    b"[/price]",
    b"[if equip]",
    b"[/if equip]",
    b"[usable job]",
    b"[/usable job]",
    b"[PRICE]",
    b"[price]",  # a later duplicate: prints raw, never a tag
    b"oddtag",
    b"[/lonely]",
    b"name_1",
    b"abc",
]
LINKS = {(0, "name_1"): "Short Sword"}
TAGS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]

record = st.one_of(
    st.tuples(st.just(cc.T_SECTION), st.sampled_from([*TAGS, len(ENTRIES) + 3])),
    st.tuples(st.sampled_from([2, 3, 4, 6, 7, 8, 10, 11]), st.integers(0, len(ENTRIES) + 1)),
    st.tuples(st.just(cc.T_LINK_ID), st.integers(0, 2)),
    st.tuples(st.just(4), st.sampled_from([0x3F800000, 0x7FC00000, 0x41200000])),
)
# A link is a type-9 record and a type-10 key record: give the stream real pairs too.
chunk = st.one_of(st.lists(record, min_size=1, max_size=3), st.just([(cc.T_LINK_ID, 0), (cc.T_LINK_KEY, 11)]))


def _payload(recs: list[tuple[int, int]]) -> bytes:
    return cc.MAGIC + b"".join(struct.pack("<BI", t, v) for t, v in recs)


def _link_text(table_id: int, key: str) -> str | None:
    return LINKS.get((table_id, key))


def _shape(node: model.Section) -> list:
    return [
        (c.name, c.has_end, c.end_tag, getattr(c, "raw_tag", None), c.values, c.after_end, _shape(c))
        for c in node.children
    ]


def _docs(data: bytes, table: StringTable) -> tuple[model.Document, model.Document]:
    full = model.Document(cc.to_tokens(data, table, _link_text), header="#PVF_File", record_width=None)
    lz = lazy.classic_document(data, table, _link_text, header="#PVF_File", record_width=None)
    assert lz is not None
    return full, lz


def _same(full: model.Document, lz: model.Document) -> None:
    assert lz.root.values == full.root.values
    assert _shape(lz.root) == _shape(full.root)
    assert lz.tokens() == full.tokens()
    assert lz.text() == full.text()


def _edit(doc: model.Document, name: str, seed: int) -> None:
    """The same edits on either document: set a value of each match, append to one, delete one."""
    found = doc.find(name)
    for i, sec in enumerate(found):
        if sec.values:
            sec.values[0] = int_token(seed + i)
        else:
            sec.values.append(int_token(seed))
    if found:
        found[-1].values.append(int_token(-seed))
        if found[0].parent is not None and len(found) > 1:
            found[0].parent.children.remove(found[0])
    model.append_section(doc.root, "added", [int_token(seed)], False)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(chunk, max_size=40),
    st.sampled_from(
        ["price", "PRICE", "if equip", "usable job", "oddtag", "/lonely", "if equip/price", "name"]
    ),
    st.integers(0, 1000),
)
def test_a_lazy_document_equals_the_whole_file_document(chunks: list, name: str, seed: int) -> None:
    data = _payload([r for c in chunks for r in c])
    table = StringTable(list(ENTRIES), "cp949")
    full, lz = _docs(data, table)
    # reads first, in a different order on each side (lazy values are decoded as they are read)
    assert [s.values for s in lz.find(name)] == [s.values for s in full.find(name)]
    _same(full, lz)
    full, lz = _docs(data, table)
    _edit(full, name, seed)
    _edit(lz, name, seed)  # writes before the values were ever read
    _same(full, lz)
    assert lz.source_tokens == cc.to_tokens(data, table, _link_text)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(chunk, max_size=40),
    st.sampled_from(["price", "PRICE", "if equip", "usable job", "oddtag", "/lonely", "name"]),
    st.integers(0, 1000),
    st.booleans(),
)
def test_a_lazy_document_written_before_its_tree_is_built_equals_the_whole_file_one(
    chunks: list, name: str, seed: int, read_all: bool
) -> None:
    """`LazyDocument.tokens()` while the tree is unbuilt (what `file.write` of a price-raise prints): the
    stored runs around the sections `find` made, some read, some changed, some untouched."""
    data = _payload([r for c in chunks for r in c])
    table = StringTable(list(ENTRIES), "cp949")
    full, lz = _docs(data, table)
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
    unbuilt = isinstance(lz.root, model._PendingRoot) and lz.root._doc is not None
    assert lz.tokens() == full.tokens()
    assert lz.text() == full.text()
    if unbuilt:  # the fast path answered: the tree is still not built
        assert isinstance(lz.root, model._PendingRoot) and lz.root._doc is not None
    _same(full, lz)


def test_every_script_of_a_classic_archive_reads_alike_lazily(tmp_path: Path) -> None:
    path = tmp_path / "c.pvf"
    synth(path, family="classic", files=300, seed=5)
    ar = open_archive(path)
    strings = ar.strings
    n = 0
    for p in ar.paths():
        data = ar.read(p)
        if not cc.is_script(data):
            continue
        width = 2 if p.endswith(".lst") else None
        full = model.Document(
            cc.to_tokens(data, strings.table, strings.link_text), header="#PVF_File", record_width=width
        )
        lz = lazy.classic_document(
            data, strings.table, strings.link_text, header="#PVF_File", record_width=width
        )
        assert lz is not None
        _same(full, lz)
        assert lz.text() == ar.read_text(p)
        n += 1
    assert n > 200
    ar.close()


# --------------------------------------------------------------------------------------------- end to end

READ_ALL = """
const out = [];
for (const f of pvf.glob("**/*.equ")) {
  const doc = f.parse();
  for (const name of ["price", "name", "usable job", "if equip/price", "weight"]) {
    for (const s of doc.sections(name)) {
      const vs = s.values();
      for (let i = 0; i <= vs.length; i++) {
        const fast = s.getValue(i), slow = s.getOriStrValue(i), raw = s.get(i);
        const plain = raw === null || typeof raw !== "object" ? raw : raw.type === "link" ? raw.text : raw.value;
        if (!(fast === plain || (typeof fast === "number" && typeof plain === "number" && Object.is(fast, plain))))
          throw new Error(f.path + " [" + name + "] " + i + ": " + fast + " != " + plain);
        if (raw !== null && typeof raw === "object" && raw.type === "float" && fast !== raw.value) throw new Error("float");
        if (slow === undefined) throw new Error("undefined");
      }
    }
  }
  out.push(doc.sections("price").length);
}
pvf.log(JSON.stringify(out));
"""

RAISE_FAST = """
let n = 0;
for (const f of pvf.glob("**/*.equ")) {
  const doc = f.parse();
  let changed = false;
  for (const s of doc.sections("price")) {
    const v = s.getValue(0);
    if (typeof v === "number" && v < 2000) { s.set(2000, 0); changed = true; }
  }
  if (changed) { f.write(doc); n++; }
}
pvf.log(String(n));
"""

# The same edits through the JSON forms only (string index, object arguments): the reference.
RAISE_SLOW = """
let n = 0;
for (const f of pvf.glob("**/*.equ")) {
  const doc = f.parse();
  let changed = false;
  for (const s of doc.sections("price")) {
    const raw = s.get(0);
    const v = raw !== null && typeof raw === "object" ? raw.value : raw;
    if (typeof v === "number" && v < 2000) {
      s.setValues([raw !== null && typeof raw === "object" ? {type: "float", value: 2000} : 2000].concat(s.values().slice(1)));
      changed = true;
    }
  }
  if (changed) { f.write(doc); n++; }
}
pvf.log(String(n));
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("family", ["classic", "nkpi"])
async def test_the_primitive_bridge_answers_and_plans_as_the_json_bridge(family: str, tmp_path: Path) -> None:
    src = tmp_path / "src.pvf"
    synth(src, family=family, files=400, seed=11)
    plans = []
    for i, script in enumerate((RAISE_FAST, RAISE_SLOW)):
        path = tmp_path / f"run{i}.pvf"
        shutil.copyfile(src, path)
        async with session(path, tmp_path / f"cache{i}") as s:
            if i == 0:
                res = await s.run(READ_ALL)
                assert res["state"] == "succeeded", res
                counts = json.loads(res["logs"][-1])
                assert sum(counts) > 20
            res = await s.run(script)
            assert res["state"] == "succeeded", res
            assert int(res["logs"][-1]) > 5
            plan = res["plan"]
            plans.append({k: (c.action, c.new, c.diff, c.requires, c.meta) for k, c in plan.changes.items()})
            s.discard(res)
    assert plans[0] == plans[1]


def test_a_tag_prefilter_answers_find_without_the_tags_only_where_no_tag_record_names_it() -> None:
    """`has_tag` looks for whole 5-byte tag records: the same bytes straddling two records (an int whose last
    byte is 5 before a type-7 record of value 0 reads `05 07 00 00 00`, the record of `[PRICE]`, index 7) are
    no tag, and a later duplicate of a tag string (index 8, printed raw) is none either."""
    table = StringTable(list(ENTRIES), "cp949")
    straddle = [(2, 0x05000000), (7, 0), (cc.T_SECTION, 8), (2, 1)]
    for recs, want in (
        (straddle, []),
        ([*straddle, (cc.T_SECTION, 7), (2, 42)], [[int_token(42)]]),
        ([(2, 3), (cc.T_SECTION, 1), (2, 9), (cc.T_SECTION, 0), (7, 12)], [[int_token(9)]]),
    ):
        data = _payload(recs)
        full, lz = _docs(data, table)
        found = lz.find("price")
        assert [s.values for s in found] == [s.values for s in full.find("price")] == want
        assert (lz._shape_of is None) == (want == [])  # no tag record: answered without scanning the tags
        _same(full, lz)


def _tags_one_by_one(data: bytes) -> lazy.RecordTags:
    """The type-5 records of one payload the way `ClassicDocument._shape` scans a file read on its own."""
    whole = (len(data) - 2) // 5 if len(data) >= 2 else 0
    at = [p for p in range(whole) if data[2 + 5 * p] == cc.T_SECTION]
    return at, [struct.unpack_from("<I", data, 3 + 5 * p)[0] for p in at]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.lists(chunk, max_size=30).map(lambda cs: _payload([r for c in cs for r in c])),
            st.binary(max_size=40),  # not a script (odd length, a record cut short, no magic): scanned alike
        ),
        max_size=12,
    ),
    st.sampled_from(["price", "PRICE", "if equip", "usable job", "oddtag", "/lonely", "name"]),
    st.integers(0, 1000),
)
def test_a_batch_tag_scan_finds_each_files_tag_records_and_its_documents_read_alike(
    payloads: list[bytes], name: str, seed: int
) -> None:
    """`lazy.batch_tags` over a batch (what the worker does with each 256 payloads it decrypts) finds of each
    file what a scan of that file alone finds — whole records only, none across two files — and a document
    given those records reads, finds, prefilters and writes as the whole-file document."""
    batch = lazy.batch_tags(payloads)
    assert batch == [_tags_one_by_one(p) for p in payloads]
    columns = lazy.BatchTags(payloads)
    for wanted in ({seed % 11}, {seed % 11, 3}, set(range(11)), {1 << 31}):
        lacking = columns.without(frozenset(wanted)).tolist()
        assert lacking == [wanted.isdisjoint(idx) for _recs, idx in batch]  # what the prefilter reads
    table = StringTable(list(ENTRIES), "cp949")
    for data, tags in zip(payloads, batch, strict=True):
        if data[:2] != cc.MAGIC or (len(data) - 2) % 5:
            continue
        full = model.Document(cc.to_tokens(data, table, _link_text), header="#PVF_File", record_width=None)
        lz = lazy.classic_document(data, table, _link_text, header="#PVF_File", record_width=None, tags=tags)
        plain = lazy.classic_document(data, table, _link_text, header="#PVF_File", record_width=None)
        assert lz is not None and plain is not None
        assert lz.lacks(name) == plain.lacks(name)
        assert [s.values for s in lz.find(name)] == [s.values for s in full.find(name)]
        _edit(full, name, seed)
        _edit(lz, name, seed)
        _same(full, lz)


@pytest.mark.anyio
async def test_the_worker_adopts_the_encoding_the_parent_detected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A classic run's job carries the pack encoding the workspace detected, and the worker takes it instead
    of detecting it again at open; a script reads its strings alike either way."""
    from deskbridge.kinds.pvf.scripting import host as host_mod
    from deskbridge.kinds.pvf.scripting import runner

    jobs: list[dict] = []
    real = runner.Worker.__init__

    def spy(self: runner.Worker, job: dict, limits: runner.ScriptLimits) -> None:
        jobs.append(job)
        real(self, job, limits)

    monkeypatch.setattr(runner.Worker, "__init__", spy)
    path = tmp_path / "c.pvf"
    synth(path, family="classic", files=120, seed=3)
    read_names = 'pvf.log(pvf.glob("equipment/**/*.equ").map(f => f.parse().sections("name").length).join())'
    async with session(path, tmp_path / "cache") as s:
        res = await s.run(read_names)
        assert res["state"] == "succeeded", res
        expected = open_archive(path).encoding
        assert jobs and jobs[-1]["detected_encoding"] == expected
    cls = type(open_archive(path))
    adopted: list[str] = []
    real_adopt = cls.adopt_detected_encoding

    def adopt(self: object, name: str) -> None:
        adopted.append(name)
        real_adopt(self, name)  # type: ignore[arg-type]

    monkeypatch.setattr(cls, "adopt_detected_encoding", adopt)

    class Frames:
        def __init__(self) -> None:
            self.frames: list[dict] = []

        def send(self, msg: dict) -> None:
            self.frames.append(msg)

    limits = {"js_mem_bytes": 512 << 20, "cpu_s": 600, "as_bytes": None, "max_changes": 1000}
    limits |= {"log_max_lines": 1000, "docs_live": 4096, "log_max_bytes": 1 << 20}
    pipe = Frames()
    h = host_mod.Host({**jobs[-1], **limits}, pipe)  # type: ignore[arg-type]
    assert adopted == [expected] and h.ar.encoding == expected
    h.run()
    assert res["logs"][-1] in json.dumps(pipe.frames, ensure_ascii=False)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from([e.decode() for e in ENTRIES[:11]] + ["[price]", "[/if equip]"]), max_size=24),
    st.sampled_from(["price", "if equip", "usable job", "oddtag", "/lonely", "name"]),
)
def test_top_level_hits_before_any_closable_tag_are_the_ones_the_nesting_walk_gives(
    tags: list[str], want: str
) -> None:
    """`TagShape.top_hits` answers without the nesting walk when every hit comes before the first tag some
    end tag closes: the same answer as with the walk."""
    infos = [model.tag_info(t) for t in tags]
    quick = model.TagShape(list(range(len(infos))), infos)
    walked = model.TagShape(list(range(len(infos))), infos)
    walked._nesting()
    assert quick.top_hits(want) == walked.top_hits(want)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(chunk, max_size=60),
    st.sampled_from(["price", "PRICE", "if equip", "usable job", "oddtag", "name", "abc"]),
    st.integers(-5, 5),
    st.sampled_from(["#PVF_File", None]),
    st.sampled_from(["read", "set", "grow", "clear", "none"]),
)
def test_a_lazy_document_printed_from_its_runs_is_the_full_printers_text(
    chunks: list, name: str, seed: int, header: str | None, how: str
) -> None:
    """`LazyDocument.text()` while the tree is unbuilt lays the file out from its tags and prints each run
    of values on its own (record pieces, `lazy.ClassicDocument._run_text`): the very text `print_tokens`
    gives all of the document's tokens, whatever the nesting, strings, links and edited sections."""
    data = _payload([r for c in chunks for r in c])
    table = StringTable(list(ENTRIES), "cp949")
    lz = lazy.classic_document(data, table, _link_text, header=header, record_width=None)
    assert lz is not None
    for i, sec in enumerate(lz.find(name)):
        if how == "read" or (how == "set" and not sec.values):
            _ = sec.values
        elif how == "set":
            sec.values[0] = int_token(seed + i)
        elif how == "grow":
            sec.values.append(cc.record_token(cc.T_STRING, 11, table))
        elif how == "clear":
            sec.values = []
    unbuilt = isinstance(lz.root, model._PendingRoot) and lz.root._doc is not None  # (a nesting tag: built)
    want = print_tokens(lz.tokens(), header=header, record_width=None)
    assert lz.text() == want
    assert lz.text() == want  # printed again from the pieces kept for the table
    if unbuilt:
        assert isinstance(lz.root, model._PendingRoot) and lz.root._doc is not None
    full = model.Document(cc.to_tokens(data, table, _link_text), header=header, record_width=None)
    if how in ("read", "none"):
        assert lz.text() == full.text()


@pytest.mark.parametrize("how", ["unread", "found", "tree", "whole"])
def test_a_released_document_is_freed_by_reference_counting(how: str) -> None:
    """An evicted document (`Document.release`) leaves no cycle for the collector: the worker's full
    collections, which walk every live object, can then run rarely (`Host.run`'s thresholds)."""
    data = _payload([(5, 0), (2, 1), (5, 3), (5, 1), (4, 0x3F800000), (5, 4), (5, 5), (7, 12), (5, 6)])
    table = StringTable(list(ENTRIES), "cp949")
    gc.collect()
    gc.disable()
    try:
        if how == "whole":
            doc: model.Document = model.Document(cc.to_tokens(data, table), header=None, record_width=None)
        else:
            lz = lazy.classic_document(data, table, None, header=None, record_width=None)
            assert lz is not None
            doc, lz = lz, None
        if how == "found":
            assert [s.values for s in doc.find("name")] == [[int_token(1)]]
        elif how in ("tree", "whole"):
            assert [c.name for c in doc.root.children] == ["name", "if equip", "usable job"]
        ref = weakref.ref(doc)
        doc.release()
        del doc
        assert ref() is None
    finally:
        gc.enable()


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab./", max_size=12))
def test_a_keys_suffix_is_what_splitext_gives(key: str) -> None:
    """`host._suffix`, the kind of a stored classic file by its name (decided once per suffix)."""
    import posixpath

    from deskbridge.kinds.pvf.scripting.host import _suffix

    assert _suffix(key) == posixpath.splitext(key)[1]
