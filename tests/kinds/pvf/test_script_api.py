"""The `.pvf.js` script API on synthetic archives of both families: every member of `pvf`, files, documents,
sections, typed values, lists and filesets; the `.d.ts` kept consistent with the runtime; a bulk change over
10,000 files. Runs go through the real worker process and end in real core plans."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from script_harness import session

from deskbridge.core.workspace import DELETED
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.script.text import lex
from deskbridge.kinds.pvf.scripting import model
from deskbridge.kinds.pvf.scripting.help import TYPES
from deskbridge.kinds.pvf.scripting.runner import ScriptLimits
from deskbridge.kinds.pvf.scripting.worker import glob_regex
from deskbridge.kinds.pvf.synth import synth

pytestmark = pytest.mark.anyio


def logged(res: dict) -> object:
    assert res["state"] == "succeeded", res
    return json.loads(res["logs"][-1])


# --------------------------------------------------------------------------------------------- model


def test_untouched_documents_print_back_to_the_same_text(archive: Path, family: str) -> None:
    ar = open_archive(archive)
    try:
        n = 0
        for p in ar.paths():
            if ar.file_info(p).kind != "script":
                continue
            text = ar.read_text(p)
            doc = model.Document(
                lex(text),
                header="#PVF_File" if family == "classic" else None,
                record_width=2 if p.endswith(".lst") else None,
            )
            assert doc.text() == text, p
            n += 1
        assert n > 100
    finally:
        ar.close()


async def test_parse_then_write_of_every_script_changes_nothing(archive: Path, tmp_path: Path) -> None:
    source = """
    let n = 0;
    for (const f of pvf.files()) {
      if (f.type !== pvf.types.script) continue;
      f.write(f.parse());
      n++;
    }
    pvf.log(n);
    """
    async with session(archive, tmp_path / "cache") as s:
        res = await s.run(source)
    assert res["state"] == "succeeded" and int(res["logs"][-1]) > 100, res
    assert res["plan"] is None and res["result"]["readOnly"] is True


async def test_old_documents_are_evicted_but_their_writes_and_warnings_stay(
    archive: Path, tmp_path: Path
) -> None:
    source = """
    const fs = pvf.glob("**/*.equ");
    const first = fs[0].parse();
    first.appendSection("price", [1]); first.appendSection("price", [2]);
    first.set("price", 5);            // a duplicate used without occurrence: a warning
    fs[0].write(first);
    for (const f of fs.slice(1, 6)) f.parse();
    let code = null;
    try { first.get("price"); } catch (e) { code = e.code; }
    pvf.log(code);
    """
    async with session(archive, tmp_path / "cache", ScriptLimits(docs_live=3)) as s:
        res = await s.run(source)
    assert res["state"] == "succeeded" and res["logs"][-1] == "INVALID_ARGUMENT", res
    (change,) = res["plan"].changes.values()
    assert any("occurs" in w for w in change.meta["warnings"])


def test_glob_semantics() -> None:
    rx = glob_regex("equipment/*.equ")
    assert rx.fullmatch("Equipment/A.EQU") and not rx.fullmatch("equipment/x/a.equ")
    rx = glob_regex("equipment/**/*.equ")
    assert rx.fullmatch("equipment/a.equ") and rx.fullmatch("equipment/x/y/a.equ")
    assert not rx.fullmatch("skill/a.equ")
    rx = glob_regex("a?c/*")
    assert rx.fullmatch("abc/d") and not rx.fullmatch("a/c/d") and not rx.fullmatch("abbc/d")
    assert glob_regex("**").fullmatch("x/y/z") and glob_regex("[x].txt").fullmatch("[x].txt")


def test_types_declaration_matches_the_runtime_members() -> None:
    declared: dict[str, set[str]] = {}
    for name, body in re.findall(r"interface (\w+) \{(.*?)\n\}", TYPES, re.S):
        members = set(re.findall(r"^\s+(?:readonly )?(\w+)[?]?[(:]", body, re.M))
        declared[name] = members
    runtime = Path(__file__).parents[3] / "src/deskbridge/kinds/pvf/scripting/prelude.js"
    js = runtime.read_text()
    classes = {"PvfFile": "PvfFile", "PvfSection": "PvfSection", "PvfDocument": "PvfDocument"}
    classes |= {"PvfList": "PvfList", "PvfFileset": "PvfFileset"}
    for cls in classes:
        body = js.split(f"class {cls} {{", 1)[1].split("\n  }\n", 1)[0]
        found = set(re.findall(r"^    (?:get )?(\w+)\(", body, re.M)) - {"constructor"}
        found |= set(re.findall(r'defineProperty\(this, "(\w+)", \{ value: \w+, enumerable: true', body))
        assert found == declared[cls], (cls, found ^ declared[cls])
    api = js.split("const pvf = {", 1)[1].split("\n  };", 1)[0]
    found = set(re.findall(r"^    (?:get )?(\w+)[(:]", api, re.M))
    assert found == declared["PvfApi"], found ^ declared["PvfApi"]
    con = js.split("const console = {", 1)[1].split("\n  };", 1)[0]
    assert set(re.findall(r"^    (\w+)\(", con, re.M)) == declared["PvfConsole"]


async def test_runtime_exposes_what_is_declared(archive: Path, tmp_path: Path) -> None:
    """The same check at run time: the objects a script gets have exactly the declared members."""
    source = """
    const names = (o) => {
      const out = new Set(Object.keys(o));
      let p = Object.getPrototypeOf(o);
      while (p && p !== Object.prototype) {
        for (const k of Object.getOwnPropertyNames(p)) if (k !== "constructor") out.add(k);
        p = Object.getPrototypeOf(p);
      }
      return [...out].sort();
    };
    const f = pvf.glob("**/*.equ")[0];
    const d = f.parse();
    const s = d.sections(d.sections("price").length ? "price" : "name")[0];
    const l = pvf.lst(pvf.glob("**/*.lst")[0].path);
    pvf.log(JSON.stringify({PvfApi: names(pvf), PvfConsole: names(console), PvfFile: names(f),
      PvfDocument: names(d), PvfSection: names(s), PvfList: names(l)}));
    """
    async with session(archive, tmp_path / "cache") as s:
        got = logged(await s.run(source))
    for name, members in got.items():  # type: ignore[union-attr]
        body = TYPES.split(f"interface {name} {{", 1)[1].split("\n}", 1)[0]
        declared = set(re.findall(r"^\s+(?:readonly )?(\w+)[?]?[(:]", body, re.M))
        assert set(members) - {"_id"} == declared, (name, set(members) ^ declared)


# --------------------------------------------------------------------------------------------- values


async def test_value_types_are_kept(archive: Path, family: str, tmp_path: Path) -> None:
    source = r"""
    const out = {};
    for (const f of pvf.glob("equipment/**/*.equ")) {
      const d = f.parse();
      for (const s of d.sections("price")) {
        const vs = s.values();
        for (let i = 0; i < vs.length; i++) {
          const v = vs[i];
          if (typeof v === "number" && out.intFile === undefined) {
            out.intFile = f.path; out.intOcc = s.occurrence; out.intIndex = i; out.intWas = v;
          }
          if (typeof v === "object" && v.type === "float" && out.floatFile === undefined) {
            out.floatFile = f.path; out.floatOcc = s.occurrence; out.floatIndex = i; out.floatWas = v.value;
          }
        }
      }
    }
    // an int slot refuses a fraction; a float slot keeps a bare whole number as a float
    const fi = pvf.find(out.intFile).parse();
    try { fi.sections("price")[out.intOcc].set(2.5, out.intIndex); out.fraction = "accepted"; }
    catch (e) { out.fraction = e.code; }
    fi.sections("price")[out.intOcc].set(12345, out.intIndex);
    pvf.find(out.intFile).write(fi);
    const ff = pvf.find(out.floatFile).parse();
    ff.sections("price")[out.floatOcc].set(7, out.floatIndex);
    out.floatNow = ff.sections("price")[out.floatOcc].get(out.floatIndex);
    pvf.find(out.floatFile).write(ff);
    out.reread = pvf.find(out.intFile).parse().sections("price")[out.intOcc].get(out.intIndex);
    try { pvf.find(out.intFile).parse().set("price", null); } catch (e) { out.nullCode = e.code; }
    pvf.log(JSON.stringify(out));
    """
    async with session(archive, tmp_path / "cache") as s:
        res = await s.run(source)
        got = logged(res)
        assert got["fraction"] == "INVALID_ARGUMENT" and got["nullCode"] == "INVALID_ARGUMENT"
        assert got["floatNow"] == {"type": "float", "value": 7.0}
        assert got["reread"] == 12345  # the run reads its own writes
        plan = res["plan"]
        keys = {k.lower() for k in plan.changes}
        assert got["intFile"].lower() in keys and got["floatFile"].lower() in keys
        diff_float = next(c.diff for k, c in plan.changes.items() if k.lower() == got["floatFile"].lower())
        assert "7.0" in diff_float.split("+++", 1)[1]
        diff_int = next(c.diff for k, c in plan.changes.items() if k.lower() == got["intFile"].lower())
        added = [ln for ln in diff_int.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
        assert any(re.search(r"(^|\t)12345(\t|$)", ln[1:]) for ln in added), diff_int


async def test_duplicate_sections_need_an_occurrence(archive: Path, tmp_path: Path) -> None:
    source = r"""
    let target = null, name = null;
    for (const f of pvf.glob("**/*.equ")) {
      const d = f.parse();
      for (const n of ["grade", "price", "durability", "weight", "rarity", "minimum level", "name", "stuck"]) {
        if (d.sections(n).length > 1) { target = f; name = n; break; }
      }
      if (target) break;
    }
    const out = {name};
    if (target) {
      const d = target.parse();
      const n = d.sections(name).length;
      d.get(name);                           // no occurrence: the first, with a warning
      d.set(name, 424242, {occurrence: n - 1, valueIndex: 0});
      out.count = n;
      out.warnings = d.warnings();
      out.last = d.getValue(name, n - 1, 0);
      out.first = d.getValue(name, 0, 0);
      out.missing = d.section(name, n);
      target.write(d);
      out.path = target.path;
    }
    pvf.log(JSON.stringify(out));
    """
    async with session(archive, tmp_path / "cache") as s:
        res = await s.run(source)
        got = logged(res)
        if got["name"] is None:
            # The classic synthesiser writes each section once: make a duplicate and read it back.
            dup = await s.run(
                r"""
                const f = pvf.glob("**/*.equ")[0]; const d = f.parse();
                d.appendSection("price", [1]); d.appendSection("price", [2.5]);
                d.set("price", 3);
                pvf.log(JSON.stringify({n: d.sections("price").length, w: d.warnings(),
                  occ: d.sections("price").map((x) => x.occurrence), last: d.get("price", 2, 0)}));
                """
            )
            got = logged(dup)
            assert got["n"] >= 3 and got["occ"] == list(range(got["n"])) and got["w"]
            assert got["last"]["type"] == "float"
            return
        assert got["count"] > 1 and got["last"] == 424242 and got["first"] != 424242
        assert got["missing"] is None and any("occurs" in w for w in got["warnings"])
        change = next(c for k, c in res["plan"].changes.items() if k.lower() == got["path"].lower())
        assert any("occurs" in w for w in change.meta["warnings"])


async def test_string_links_are_kept_and_resolved(archive: Path, family: str, tmp_path: Path) -> None:
    source = r"""
    const out = {links: 0};
    for (const f of pvf.glob("**/*.equ")) {
      const d = f.parse();
      for (const s of d.sections("name").concat(d.sections("name2"))) {
        const v = s.get(0);
        if (v !== null && typeof v === "object" && v.type === "link" && out.link === undefined) {
          out.link = v; out.ori = s.getOriStrValue(0); out.path = f.path;
          out.global = pvf.getOriStrValue("<" + v.id + "::" + v.key + ">");
          try { s.set("flattened"); out.flatten = "accepted"; } catch (e) { out.flatten = e.code; }
          s.set({type: "link", id: v.id, key: v.key});
          s.setStrValue("plain now", 0);
          out.after = s.get(0);
          f.write(d);
        }
        if (v !== null && typeof v === "object" && v.type === "typed" && out.typed === undefined) out.typed = v;
      }
    }
    pvf.log(JSON.stringify(out));
    """
    async with session(archive, tmp_path / "cache") as s:
        got = logged(await s.run(source))
    if family == "classic":
        link = got["link"]
        assert link["type"] == "link" and link["key"].startswith("name_") and link["text"]
        assert got["ori"] == link["text"] == got["global"]
        assert got["flatten"] == "INVALID_ARGUMENT" and got["after"] == "plain now"
    else:
        assert got["typed"]["type"] == "typed" and isinstance(got["typed"]["code"], int)


# --------------------------------------------------------------------------------------------- files and lists


@pytest.mark.security
async def test_a_script_creates_no_file_whose_name_cannot_be_extracted(
    archive: Path, family: str, tmp_path: Path
) -> None:
    """createFile / copyFile give a new file the import's name rules: a drive, a reserved Windows name, a
    character Windows cannot hold or a `..` component is INVALID_ARGUMENT (extracting such an entry would
    fail or land outside the output folder), and the run plans nothing."""
    source = r"""
    const out = {};
    const src = pvf.glob("**/*.equ")[0];
    for (const bad of ["c:/evil.equ", "equipment/con.equ", "equipment/a|b.equ", "equipment/../x.equ", "equipment/trail. "]) {
      try { pvf.createFile(bad, pvf.types.script, "[price]\n1\n"); out[bad] = "created"; } catch (e) { out[bad] = e.code; }
      try { pvf.copyFile(src.path, bad); out["copy " + bad] = "copied"; } catch (e) { out["copy " + bad] = e.code; }
    }
    pvf.log(JSON.stringify(out));
    """
    async with session(archive, tmp_path / "cache") as s:
        res = await s.run(source)
        got = logged(res)
        assert set(got.values()) == {"INVALID_ARGUMENT"}, got
        assert res["plan"] is None


async def test_files_create_copy_delete_lists_and_counts(archive: Path, family: str, tmp_path: Path) -> None:
    source = r"""
    const out = {};
    const lstFile = pvf.glob("equipment/*.lst")[0];
    const lst = pvf.lst(lstFile.path);
    const entries = lst.get();
    const ids = Object.keys(entries).map(Number);
    out.entries = ids.length;
    let seen = 0; lst.forEach((id, path) => { if (entries[id] === path) seen++; });
    out.forEachOk = seen === ids.length;
    out.getId = lst.getId(entries[ids[0]]) === ids[0];
    const created = pvf.createFile("equipment/new/sword_js.equ", pvf.types.script, "[price]\n100\n");
    out.createdType = created.type;
    try { pvf.createFile("equipment/new/sword_js.equ"); } catch (e) { out.twice = e.code; }
    try { lst.set(999001, "equipment/none/ghost.equ"); } catch (e) { out.ghost = e.code; }
    lst.set(999001, created.path);
    out.newId = lst.getId(created.path);
    out.unset = lst.unset(ids[1]);
    out.unsetAgain = lst.unset(ids[1]);
    const src = pvf.glob("**/*.equ")[0];
    const copy = pvf.copyFile(src.path, "equipment/new/copy_js.equ");
    out.copyText = copy.text() === src.text();
    try { pvf.copyFile(src.path, copy.path); } catch (e) { out.copyTwice = e.code; }
    const victim = pvf.glob("**/*.stk")[0] || pvf.glob("**/*.skl")[0];
    out.deleted = pvf.deleteFile(victim.path);
    out.deletedAgain = pvf.deleteFile(victim.path);
    out.findDeleted = pvf.find(victim.path);
    out.findCase = pvf.find(src.path.toUpperCase()) !== null;
    out.modified = pvf.modifiedCount;
    out.scanned = pvf.scannedCount;
    out.files = pvf.files().length;
    out.types = pvf.types;
    out.size = src.size > 0 && typeof src.index === "number";
    pvf.progress(1, 2, "half");
    console.warn("careful"); console.error("bad"); console.info("fyi");
    pvf.log(JSON.stringify(out));
    """
    async with session(archive, tmp_path / "cache") as s:
        res = await s.run(source)
        got = logged(res)
        assert got["forEachOk"] and got["getId"] and got["entries"] >= 3
        assert got["createdType"] == 1 and got["twice"] == "TARGET_EXISTS" and got["ghost"] == "NOT_FOUND"
        assert got["newId"] == 999001 and got["unset"] is True and got["unsetAgain"] is False
        assert got["copyText"] and got["copyTwice"] == "TARGET_EXISTS"
        assert got["deleted"] is True and got["deletedAgain"] is False and got["findDeleted"] is None
        assert got["findCase"] and got["modified"] == 4 and got["scanned"] >= 1
        assert got["types"] == {"script": 1, "unicode": 3} and got["size"]
        assert "[warn] careful" in res["logs"] and "[error] bad" in res["logs"]
        plan = res["plan"]
        actions = {k.lower(): c.action for k, c in plan.changes.items()}
        assert (
            actions["equipment/new/sword_js.equ"] == "add" and actions["equipment/new/copy_js.equ"] == "add"
        )
        assert "delete" in actions.values()
        lst_key = next(k for k in plan.changes if k.lower().endswith(".lst"))
        assert plan.changes[lst_key].requires == ("equipment/new/sword_js.equ",) or (
            "equipment/new/sword_js.equ" in plan.changes[lst_key].requires
        )
        # Apply everything and read the registry back through the workspace.
        keys = list(plan.changes)
        s.svc.engine.apply_plan(plan.id, caller="ui", change_keys=keys, expected_revision=s.rev)
        with s.svc.engine.lock:
            ws = s.svc.engine.current(s.ws)
            assert ws.overlay[ws.key_of(lst_key)] is not DELETED
        text = s.text(lst_key)
        assert "999001" in text and "sword_js.equ" in text


async def test_filesets_are_written_for_the_ui_only(archive: Path, tmp_path: Path) -> None:
    async with session(archive, tmp_path / "cache") as s:
        s.runs.config_dir = tmp_path / "config"
        res = await s.run("pvf.createFileset('mine', ['a/b.equ', 'a/b.equ', 'c.equ'])", caller="ui")
        assert res["state"] == "succeeded" and res["plan"] is None
        saved = json.loads((tmp_path / "config" / "pvf-file-sets.json").read_text())
        assert saved["sets"]["mine"] == ["a/b.equ", "c.equ"]
        res = await s.run("const f = pvf.fileset('mine'); pvf.log(JSON.stringify(f.getAll())); f.setAll([])")
        assert res["state"] == "failed" and res["error"]["code"] == "UNSUPPORTED_CHANGE"
        assert json.loads(res["logs"][0]) == ["a/b.equ", "c.equ"]
        assert pvf_none(await s.run("pvf.log(String(pvf.fileset('nope')))"))


def pvf_none(res: dict) -> bool:
    return res["state"] == "succeeded" and res["logs"] == ["null"]


# --------------------------------------------------------------------------------------------- bulk


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_bulk_change_over_ten_thousand_files(tmp_path: Path) -> None:
    path = tmp_path / "bulk.pvf"
    synth(path, family="nkpi", files=10_400, seed=11)
    source = r"""
    let n = 0;
    const all = pvf.files();
    for (const f of all) {
      if (f.type !== pvf.types.script || f.path.endsWith(".lst")) continue;
      const d = f.parse();
      d.appendSection("bulk mark", [n, {type: "float", value: 0.5}]);
      f.write(d);
      n++;
      if (n % 1000 === 0) pvf.progress(n, all.length);
    }
    pvf.log(n);
    """
    async with session(path, tmp_path / "cache", ScriptLimits(wall_s=1500)) as s:
        res = await s.run(source, timeout=1700)
        assert res["state"] == "succeeded", res
        n = int(res["logs"][-1])
        assert n >= 10_000 and len(res["plan"].changes) == n
        some = next(iter(res["plan"].changes.values()))
        assert "[bulk mark]" in some.diff and "0.5" in some.diff


@pytest.mark.parametrize("batch", [1, 3])
async def test_a_plan_compiled_in_batches_is_the_plan_compiled_at_once(
    archive: Path, family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """The parent compiles change frames as they arrive, a batch per hold of the engine lock; new strings
    (classic: one grown stringtable.bin that the changes needing it require) come out as in one batch."""
    from deskbridge.kinds.pvf.scripting import runner

    source = r"""
    const files = pvf.glob("equipment/**/*.equ").slice(0, 7);
    files.forEach((f, i) => {
      const d = f.parse();
      // the first files only change numbers; the later ones add strings no file had
      if (i < 3) for (const s of d.sections("price")) s.set(12345 + i, 0);
      else d.appendSection("batch mark " + i, ["a new string " + i]);
      f.write(d);
    });
    pvf.log(files.length);
    """

    async def plan_with(size: int | None) -> list[tuple]:
        if size is None:  # the reference: every frame compiled in one batch, after the worker's `done`
            monkeypatch.setattr(runner._PlanBuilder, "streaming", property(lambda self: False))
        else:
            monkeypatch.undo()
            monkeypatch.setattr(runner, "_BATCH", size)
        async with session(archive, tmp_path / f"cache-{size}") as s:
            res = await s.run(source)
            assert res["state"] == "succeeded", res
            plan = res["plan"]
            out = [
                (c.key, c.action, c.new, c.requires, c.meta, c.binary, c.diff) for c in plan.changes.values()
            ]
            s.discard(res)
            return out

    once = await plan_with(None)
    assert len(once) >= 5
    if family == "classic":
        table = once[-1][0]
        assert table.lower() == "stringtable.bin"
        assert [c[3] for c in once[-5:-1]] == [(table,)] * 4 and all(c[3] == () for c in once[:-5])
    assert await plan_with(batch) == once


async def test_a_failing_script_reports_its_line_and_the_host_error_code(
    archive: Path, tmp_path: Path
) -> None:
    async with session(archive, tmp_path / "cache") as s:
        res = await s.run("const a = 1;\n\npvf.lst('nope.lst');\n")
        assert res["state"] == "failed" and res["error"]["code"] == "NOT_FOUND", res
        assert res["error"]["data"]["line"] == 3
        res = await s.run("const a = 1;\nnull.x;\n")
        assert res["error"]["code"] == "INVALID_ARGUMENT" and res["error"]["data"]["line"] == 2
        assert (
            res["error"]["data"]["scriptError"] == "SCRIPT_ERROR" and "TypeError" in res["error"]["message"]
        )


async def test_a_promise_rejection_nobody_handles_fails_the_run_like_a_throw(
    archive: Path, tmp_path: Path
) -> None:
    # An un-awaited async function that threw, or a Promise.reject never caught, ended the run "succeeded":
    # its changes went into a plan as if the script had done all its work.
    async with session(archive, tmp_path / "cache") as s:
        res = await s.run("async function main() {\n  await null;\n  pvf.lst('nope.lst');\n}\nmain();\n")
        assert res["state"] == "failed" and res["error"]["code"] == "NOT_FOUND", res
        assert res["error"]["data"]["line"] == 3 and "in promise" in res["error"]["message"]
        res = await s.run("const a = 1;\nPromise.reject(new Error('no price table'));\n")
        assert res["state"] == "failed" and "no price table" in res["error"]["message"], res
        assert res["error"]["data"]["line"] == 2 and res["error"]["data"]["scriptError"] == "SCRIPT_ERROR"
        res = await s.run("new Promise((_, reject) => reject('a plain string'));\n")
        assert res["state"] == "failed" and "a plain string" in res["error"]["message"], res


async def test_a_rejection_handled_later_or_awaited_does_not_fail_the_run(
    archive: Path, tmp_path: Path
) -> None:
    source = """
    const late = Promise.reject(new Error("late"));
    async function main() {
      try { await Promise.reject(new Error("awaited")); } catch (e) { pvf.log("caught " + e.message); }
      await null;
      late.catch((e) => pvf.log("caught " + e.message));
    }
    main();
    """
    async with session(archive, tmp_path / "cache") as s:
        res = await s.run(source)
        assert res["state"] == "succeeded", res
        assert res["logs"] == ["caught awaited", "caught late"]


async def test_a_value_json_cannot_carry_is_named_as_the_script_wrote_it(
    archive: Path, tmp_path: Path
) -> None:
    """`set(NaN)` said "None is not a PVF value": NaN, ±Infinity and undefined cross to the host as JSON
    null, and the message named Python's None, which the script never wrote."""
    source = r"""
    const out = {};
    const f = pvf.glob("equipment/**/*.equ")[0];
    const d = f.parse();
    for (const [name, v] of [["nan", NaN], ["inf", Infinity], ["null", null], ["undef", undefined]]) {
      try { d.set("price", v); out[name] = "accepted"; } catch (e) { out[name] = e.code + ": " + e.message; }
    }
    pvf.log(JSON.stringify(out));
    """
    async with session(archive, tmp_path / "cache") as s:
        got = logged(await s.run(source))
    for name in ("nan", "inf", "null", "undef"):
        assert got[name].startswith("INVALID_ARGUMENT"), got
        assert "None" not in got[name], got
        assert "null, undefined, NaN or Infinity" in got[name], got
