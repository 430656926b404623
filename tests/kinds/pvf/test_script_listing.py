"""File objects of a listing (`pvf.glob` / `pvf.files`) name their file to the primitive `file.parse` by
(listing number, position), which skips resolving the path: the host takes the position only where it names
the very file the path resolves to, so a forged or stale position, a path outside the archive, or a file the
run has written reads exactly as `parse(path)` would."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from script_harness import session

from deskbridge.kinds.pvf.scripting.host import Host, _plain_keys
from deskbridge.kinds.pvf.scripting.runner import ScriptLimits
from deskbridge.kinds.pvf.scripting.worker import ScriptError
from deskbridge.kinds.pvf.synth import synth


def _accepted_as_is(key: str) -> bool:
    try:
        return Host._key(None, key) == key  # type: ignore[arg-type]
    except ScriptError:
        return False


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(alphabet="a/. \x01\x7f\t", max_size=8), min_size=1, max_size=4))
def test_keys_checked_in_bulk_are_ones_the_path_check_accepts(keys: list[str]) -> None:
    if _plain_keys(keys):
        assert all(_accepted_as_is(k) for k in keys)
    if not all(_accepted_as_is(k) for k in keys):
        assert not _plain_keys(keys)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _logged_by(source: str, tmp_path: Path, seed: int, limits: ScriptLimits | None = None) -> Any:
    """Run `source` over a 200-file classic archive made with `seed`: what its last log line says (JSON); its
    plan is discarded."""
    src = tmp_path / "src.pvf"
    synth(src, family="classic", files=200, seed=seed)
    path = tmp_path / "Script.pvf"
    shutil.copyfile(src, path)
    async with session(path, tmp_path / "cache", limits) as s:
        res = await s.run(source)
        assert res["state"] == "succeeded", res
        s.discard(res)
    return json.loads(res["logs"][-1])


FORGED = r"""
const out = {};
const files = pvf.glob("**/*.equ");
const a = files[0], b = files[1];
const P = Object.getPrototypeOf(a);
const name = (d) => d.sections("name").map((s) => s.getValue(0)).join("|");
out.real = name(a.parse());
// a's path with b's position: the host reads a (the path decides), never b
out.forged = name(P.parse.call({ path: a.path, _g: b._g, _i: b._i }));
out.other = name(b.parse());
for (const [k, p] of [["outside", "../../etc/passwd"], ["absolute", "/etc/passwd"], ["missing", "no/such.equ"]]) {
  try { P.parse.call({ path: p, _g: a._g, _i: a._i }); out[k] = "parsed"; } catch (e) { out[k] = e.code; }
}
// a stale listing (another listing came after it) still reads its files
pvf.files();
out.stale = name(a.parse());
// a file the run wrote reads as written, through its listed object
a.setText("#PVF_File\n[name]\n\t`rewritten`\n");
out.written = name(a.parse());
pvf.log(JSON.stringify(out));
"""


@pytest.mark.anyio
@pytest.mark.security
async def test_a_forged_or_stale_position_reads_what_the_path_names(tmp_path: Path) -> None:
    out = await _logged_by(FORGED, tmp_path, seed=3)
    assert out["real"] and out["other"] and out["real"] != out["other"]
    assert out["forged"] == out["real"] == out["stale"]
    assert out["outside"] == "INVALID_ARGUMENT"
    assert out["absolute"] == out["missing"] == "NOT_FOUND"  # `/etc/passwd` is the archive path etc/passwd
    assert out["written"] == "rewritten"


HINTED = r"""
const out = {};
const files = pvf.glob("**/*.equ");
const name = "no such section";
const first = files[0].parse();
out.asked = first.sections(name).length;  // the host now knows the name: later parses answer for it
const d = files[1].parse();
out.hinted = d._miss === name;  // the host did answer for this name (so what follows tests the hint)
out.before = d.sections(name).length;
d.appendSection(name, [5]);
out.appended = d.sections(name).map((s) => s.getValue(0));
const e = files[2].parse();
e.set(name, 7, { create: true });
out.created = e.sections(name).map((s) => s.getValue(0));
const f = files[3].parse();
out.other = f.sections(name.toUpperCase()).length;
// parsed long ago: evicted by the host (docs_live), so the hint no longer answers
const old = files[4].parse();
for (let i = 5; i < 12; i++) files[i].parse();
try { old.sections(name); out.old = "answered"; } catch (err) { out.old = err.code; }
pvf.log(JSON.stringify(out));
"""


@pytest.mark.anyio
async def test_the_no_such_section_hint_holds_until_the_document_changes(tmp_path: Path) -> None:
    """`file.parse` tells the prelude when the new document has no tag of the name last asked for; the
    prelude answers `sections(name)` itself only while the document is unchanged and still live."""
    out = await _logged_by(HINTED, tmp_path, seed=4, limits=ScriptLimits(docs_live=4))
    assert out == {
        "asked": 0,
        "hinted": True,
        "before": 0,
        "appended": [5],
        "created": [7],
        "other": 0,
        "old": "INVALID_ARGUMENT",
    }


PENDING = r"""
const out = {};
const files = pvf.glob("**/*.equ");
const name = (d) => d.sections("name").map((s) => s.getValue(0)).join("|");
out.before = name(files[1].parse());
files[0].parse().sections("no such section");  // the name the host now answers parses for
const d = files[1].parse();  // no such tag: answered without building the document
out.hinted = d._miss === "no such section";
files[1].setText("#PVF_File\n[name]\n\t`rewritten`\n");  // the run writes the file after that parse
out.built = name(d);  // built on first use: the file as it was parsed
out.warned = d.warnings().length;
out.now = name(files[1].parse());
// a forged id names no document the host answered for
const P = Object.getPrototypeOf(d);
try { P.warnings.call({ _id: 1e6 }); out.forged = "answered"; } catch (e) { out.forged = e.code; }
pvf.log(JSON.stringify(out));
"""


@pytest.mark.anyio
async def test_a_document_answered_without_being_built_reads_the_file_as_parsed(tmp_path: Path) -> None:
    """A parse the batch prefilter answers "no such section" for builds no document; the host builds it from
    the stored payload when the script first uses it, even after the run wrote the file."""
    out = await _logged_by(PENDING, tmp_path, seed=5)
    assert out["before"] and out["hinted"] is True
    assert out["built"] == out["before"] and out["now"] == "rewritten"
    assert out["warned"] == 0 and out["forged"] == "INVALID_ARGUMENT"


FIRST_VALUES = r"""
const out = {};
const files = pvf.glob("**/*.equ");
let d = null, a = null, at = 0;
for (; at < files.length && a === null; at++) {
  const doc = files[at].parse();
  const found = doc.sections("price");
  if (found.length && typeof found[0].getValue(0) === "number") { d = doc; a = found[0]; }
}
const b = d.sections("price")[0];  // the same section, another object with its own first value
const before = a.getValue(0);
out.same = b.getValue(0) === before && a.get(0) === before;
b.set(before + 1, 0);  // the primitive set, through the other object
out.afterSet = a.getValue(0) === before + 1;
d.set("price", before + 2);  // a JSON operation on the document
out.afterDocSet = a.getValue(0) === before + 2 && b.getValue(0) === before + 2;
const c = d.sections("price")[0];
d.delete("price", 0);
try { c.getValue(0); out.deleted = "answered"; } catch (e) { out.deleted = e.code; }
// a section of a document parsed long ago (docs_live) is not answered from what it read then
let old = [];
for (; at < files.length && !old.length; at++) old = files[at].parse().sections("price");
out.fresh = typeof old[0].getValue(0) === "number";
for (let i = at; i < at + 8; i++) files[i].parse();
try { old[0].getValue(0); out.old = "answered"; } catch (err) { out.old = err.code; }
pvf.log(JSON.stringify(out));
"""


@pytest.mark.anyio
async def test_first_values_the_sections_answer_brought_hold_only_while_nothing_changed(
    tmp_path: Path,
) -> None:
    """`doc.sections(name)` brings each section's first number, so `getValue(0)` asks the host nothing;
    a set (primitive or JSON) by any object, a delete and the document's eviction each end that answer."""
    out = await _logged_by(FIRST_VALUES, tmp_path, seed=6, limits=ScriptLimits(docs_live=4))
    assert out == {
        "same": True,
        "afterSet": True,
        "afterDocSet": True,
        "deleted": "INVALID_ARGUMENT",
        "fresh": True,
        "old": "INVALID_ARGUMENT",
    }


REWRITES = r"""
const files = pvf.glob("**/*.equ");
const [a, b, c, d] = files;
a.write(a.parse());  // sent when written (it compiles to its old payload) ...
a.setText("#PVF_File\n[name]\n\t`rewritten`\n");  // ... then rewritten as text
let doc = b.parse();
doc.appendSection("pvfjs one", [1]);
b.write(doc);
doc = b.parse();  // the written text
doc.appendSection("pvfjs two", [2]);
b.write(doc);
doc = c.parse();
doc.appendSection("pvfjs gone", [3]);
c.write(doc);
pvf.deleteFile(c.path);
const original = d.parse();
doc = d.parse();
doc.appendSection("pvfjs undone", [4]);
d.write(doc);
d.write(original);  // back as it was: no change
pvf.log(JSON.stringify([a.path, b.path, c.path, d.path]));
"""


@pytest.mark.anyio
async def test_a_file_written_again_after_its_frame_was_sent_plans_its_last_state(tmp_path: Path) -> None:
    """The worker sends a stored file's change when the script writes it (the parent compiles it while the
    script goes on) and again at the end if it changed since: the plan holds each file's last state."""
    src = tmp_path / "src.pvf"
    synth(src, family="classic", files=200, seed=7)
    path = tmp_path / "Script.pvf"
    shutil.copyfile(src, path)
    async with session(path, tmp_path / "cache") as s:
        res = await s.run(REWRITES)
        assert res["state"] == "succeeded", res
        a, b, c, _d = json.loads(res["logs"][-1])
        changes = {k.lower(): ch for k, ch in res["plan"].changes.items()}
        s.discard(res)
    # (the string table grows with the strings of the frames compiled early, those of c and d too)
    assert set(changes) - {"stringtable.bin"} == {a.lower(), b.lower(), c.lower()}
    assert "rewritten" in changes[a.lower()].diff
    diff_b = changes[b.lower()].diff
    assert "pvfjs one" in diff_b and "pvfjs two" in diff_b
    assert changes[c.lower()].action == "delete"
