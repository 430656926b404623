"""`pvf_script_help` topics: overview, api, types (the `.d.ts`), examples, pitfalls."""

from __future__ import annotations

from pathlib import Path

TYPES = (Path(__file__).with_name("api.d.ts")).read_text(encoding="utf-8")

OVERVIEW = """\
`.pvf.js` programs change many archive files at once. They run in a sandbox (QuickJS in a separate process:
no require, import, process, network or file system; 5 minutes; 512 MiB) over the open archive as you see it,
including unsaved changes. Every write is staged: the run ends in a plan you preview and apply.

Flow: pvf_script_validate {source} → pvf_script_run {workspaceId, expectedRevision, source} (taskId at once)
→ pvf_script_status {taskId, logCursor} until state is succeeded (result.planId; null for a read-only run)
→ pvf_plan_preview {planId} → pvf_plan_apply {planId, expectedRevision, changeKeys} → pvf_archive_save.
Cancel a run with pvf_script_cancel, drop a plan with pvf_plan_discard. A plan is built on one revision:
if the workspace moved on, apply answers STALE_PLAN — run the script again.
Read-only queries: log with pvf.log(); no plan is kept. For plain lookups prefer pvf_search / pvf_read_file.
"""

API = """\
pvf.files() / pvf.find(path) / pvf.glob(pattern) → files (glob: case-insensitive; * and ? stay within a
folder; ** crosses folders; `equipment/**/*.equ`).
pvf.createFile(path, type = pvf.types.script, text?) · pvf.copyFile(from, to, overwrite = false) ·
pvf.deleteFile(path) → bool · pvf.lst(path) → list · pvf.fileset(name) · pvf.createFileset(name, paths) ·
pvf.getOriStrValue('<id::key>') → the linked text · pvf.log(...) · pvf.progress(done, total, message?) ·
pvf.types {script: 1, unicode: 3} · pvf.modifiedCount · pvf.scannedCount · console.log/warn/error.
file: path, index, type, size, text(), setText(text), parse() → document, write(document).
document: sections(path) · section(path, occurrence?) · get/getValue/getOriStrValue(path, occurrence?,
valueIndex?) · set(path, value, {occurrence, valueIndex, create, endTag}) · setStrValue(path, text, opts) ·
delete(path, occurrence?) · appendSection(name, values?, {endTag}) · warnings().
Section paths name tags without brackets; nested sections (inside [x] … [/x]) are 'x/child'.
section: name, hasEndTag, path, occurrence, values(), children(), removeChildren(name), get/getValue/
getOriStrValue(i = 0), set(value, i = 0), setStrValue(text, i = 0), setValues([...]), append(value),
appendSection(name, values?, {endTag}), delete().
list (.lst): get() → {id: path} · forEach((id, path) => …) in file order · set(id, path) (the file must
exist; paths are archive paths, the list's own layout is handled) · mset({id: path}) · unset(id) · getId(path).
fileset (the person's own lists in the user config folder, not in the archive; read-only over MCP:
UNSUPPORTED_CHANGE): name, getAll(), setAll(paths).
"""

EXAMPLES = """\
// Raise every equipment price below 10 to 10 (ints stay ints, floats floats). A file may hold [price] more
// than once: go through every occurrence (doc.getValue("price") alone reads only the first, with a warning).
for (const f of pvf.glob("equipment/**/*.equ")) {
  const doc = f.parse();
  let raised = false;
  for (const price of doc.sections("price")) {
    const value = price.getValue();
    if (typeof value === "number" && value < 10) {
      price.set(10);
      raised = true;
    }
  }
  if (raised) f.write(doc);
}
pvf.log("changed", pvf.modifiedCount, "of", pvf.scannedCount);

// A read-only query: no plan is kept.
for (const f of pvf.glob("equipment/**/*.equ")) {
  if (f.parse().sections("price").length > 1) pvf.log(f.path);
}

// A new item, registered in its list (the list change requires the new file).
const item = pvf.createFile("equipment/new/sword.equ", pvf.types.script, "[name]\\n`Sword`\\n[price]\\n100\\n");
pvf.lst("equipment/equipment.lst").set(99001, item.path);
"""

PITFALLS = """\
* Numbers keep their type: a bare number written into a float slot stays a float (8000 → 8000.0) and into
  an int slot must be integral. Change a type on purpose with {type: "float", value} / {type: "int", value}.
* String links (<id::key>) are never flattened: set() with a plain string over a link is refused; edit the
  .str entry, pass {type: "link", id, key}, or setStrValue() to replace the link on purpose.
* Duplicate sections: get/set without an occurrence use the first and record a warning (doc.warnings(), and
  the plan's per-file warnings). Loop over doc.sections(path) to touch every one.
* New strings in classic archives grow stringtable.bin: the plan holds it as its own change, which the files
  `require`; select them together (or acknowledge the dependency warning).
* A .lst entry for a file created in the same run requires that file's change.
* On 110US (the page-guarded nkpi archives) a plain string set() registers a .str entry (key pvfjs_<n>, in
  the table of the script's top folder) and writes a {type: "typed", code: 8} reference to it; the .str
  change is required by the files using it. setStrValue() writes an inline string instead.
* Logs are capped (100,000 lines / 4 MiB: the run is stopped past that); use pvf.progress for progress.
* Source at most 1 MiB; no require/import/eval of host code; the archive is reached only through `pvf`.
"""

TOPICS = {"overview": OVERVIEW, "api": API, "types": TYPES, "examples": EXAMPLES, "pitfalls": PITFALLS}
