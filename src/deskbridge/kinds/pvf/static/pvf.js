// The PVF workspace in the browser: a virtualised archive tree, viewer/editor, search as you type, save / save-as,
// import / export, tasks and history. Every action calls the same pvf_* tools as an MCP client (as caller "ui"),
// so the engine's rules (revisions, plans, the draft barrier) hold here too. No build step, no dependencies.
"use strict";
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
const ROW = 24;
const CLIENT = "pvf-ui-" + Math.random().toString(36).slice(2, 10);

async function api(path, opts = {}) {
  const res = await fetch(path, { credentials: "same-origin", headers: { "content-type": "application/json" }, ...opts });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) {
    const err = new Error(body.error?.message || res.statusText);
    err.code = body.error?.code;
    err.data = body.error?.data;
    throw err;
  }
  return body;
}
const tool = (name, args = {}) => api(`/api/tools/${name}`, { method: "POST", body: JSON.stringify({ arguments: args }) });

// Every plan tool this page calls, in one table, called only through planTool(): when plan tools are merged or
// renamed, the change is here. `id` names the argument that carries the plan's id.
// One plan flow for every kind (a plan id names its kind): pvf_plan_preview / _apply / _discard; only an export
// plan is carried out by pvf_export_execute (it writes outside the archive).
const PLAN_TOOLS = {
  preview: { name: "pvf_plan_preview", id: "planId" },
  apply: { name: "pvf_plan_apply", id: "planId" },
  discard: { name: "pvf_plan_discard", id: "planId" },
  exportApply: { name: "pvf_export_execute", id: "exportPlanId" },
};
const PLAN_KINDS = new Set(["edit", "import", "export", "script"]);
function planTool(kind, verb, planId, args = {}) {
  const t = PLAN_TOOLS[kind === "export" && verb === "apply" ? "exportApply" : verb];
  return tool(t.name, { [t.id]: planId, ...args });
}

function showError(e) {
  const b = $("error-banner");
  b.textContent = e ? `${e.code || "ERROR"}: ${e.message}` : "";
  b.hidden = !e;
}

const state = { info: null, cwd: "", list: [], total: 0, cursor: null, loading: false, query: "", file: null, text: "", editing: false, plan: null, tasks: new Map(), plans: new Map() };

// ----------------------------------------------------------------------------------------------- workspace

async function refreshInfo() {
  const info = await tool("pvf_workspace_info");
  state.info = info;
  $("archive").textContent = info.open ? `${info.sourcePath} · ${info.archive.family}/${info.archive.variant} · ${info.archive.files} files` : "no archive open";
  $("rev").textContent = info.open ? `rev ${info.revision}` : "";
  $("dirty").hidden = !info.sourceDirty;
  for (const id of ["save-btn", "saveas-btn", "import-btn", "export-btn"]) $(id).disabled = !info.open;
  $("edit-btn").disabled = !info.open || !state.file;
  // Another program replaced the archive while these changes were unsaved (kinds/pvf/outside.py): say so, and
  // the person's ways out with this page's buttons (the notice's own hint names the tools, for agents).
  const outside = info.externalChange;
  $("outside-banner").hidden = !outside;
  $("outside-banner").textContent = outside
    ? `${outside.message}. Save a copy… keeps this workspace's content; Open… with the same path and "discard" takes the file on disk.`
    : "";
  document.dispatchEvent(new CustomEvent("pvf-info"));
  return info;
}

const ws = () => state.info?.workspaceId;

// ----------------------------------------------------------------------------------------------- tree (virtualised)

function resetList() {
  state.list = []; state.total = 0; state.cursor = null;
  $("tree").scrollTop = 0;
}

async function loadMore() {
  if (state.loading || !ws()) return;
  if (state.list.length && !state.cursor) return;
  state.loading = true;
  try {
    let page;
    if (state.query) {
      page = await tool("pvf_search", { workspaceId: ws(), query: state.query, mode: $("content-mode").checked ? "content" : "path", limit: 500, cursor: state.cursor || undefined });
      const rows = page.hits.map((h) => ({ type: "file", path: h.path, name: h.path, changed: h.changed, hit: h.matches ? `${h.matches[0].line}: ${h.matches[0].text.trim()}` : "" }));
      state.list.push(...rows);
      state.total = state.list.length + (page.nextCursor ? 1 : 0);
    } else {
      page = await tool("pvf_list_dir", { workspaceId: ws(), path: state.cwd, limit: 1000, cursor: state.cursor || undefined });
      state.list.push(...page.entries);
      state.total = page.total;
    }
    state.cursor = page.nextCursor;
    showError(null);
  } catch (e) {
    // another archive is open (or the file was reloaded after another program changed it): the current one
    if (e.code === "STALE_WORKSPACE") { resetList(); state.loading = false; await refreshInfo().catch(() => {}); return loadMore(); }
    showError(e);
  } finally {
    state.loading = false;
  }
  renderTree();
}

function renderTree() {
  const tree = $("tree");
  $("tree-spacer").style.height = `${Math.max(state.total, state.list.length) * ROW}px`;
  const first = Math.floor(tree.scrollTop / ROW);
  const count = Math.ceil(tree.clientHeight / ROW) + 4;
  const rows = [];
  for (let i = first; i < Math.min(first + count, state.list.length); i++) {
    const e = state.list[i];
    const cls = ["row", e.type === "dir" ? "dir" : "file", e.changed ? "changed" : "", state.file === e.path ? "sel" : ""].join(" ");
    rows.push(`<div class="${cls}" data-i="${i}" title="${esc(e.path)}">${esc(e.name)}${e.hit ? `<span class="hit">${esc(e.hit)}</span>` : ""}</div>`);
  }
  const holder = $("tree-rows");
  holder.style.transform = `translateY(${first * ROW}px)`;
  holder.innerHTML = rows.join("");
  $("tree-count").textContent = state.query ? `${state.list.length}${state.cursor ? "+" : ""} hits` : `${state.total} entries`;
  if (first + count >= state.list.length - 50 && state.cursor) loadMore();
  renderCrumbs();
}

function renderCrumbs() {
  const parts = state.cwd ? state.cwd.split("/") : [];
  const links = [`<a data-p="">/</a>`];
  parts.forEach((p, i) => links.push(`<a data-p="${esc(parts.slice(0, i + 1).join("/"))}">${esc(p)}</a>`));
  $("crumbs").innerHTML = state.query ? `search: ${esc(state.query)}` : links.join(" / ");
}

$("tree").addEventListener("scroll", () => requestAnimationFrame(renderTree));
$("tree-rows").addEventListener("click", (ev) => {
  const row = ev.target.closest(".row");
  if (!row) return;
  const e = state.list[Number(row.dataset.i)];
  if (e.type === "dir") { state.cwd = e.path; state.query = ""; $("search").value = ""; resetList(); loadMore(); }
  else openFile(e.path);
});
$("crumbs").addEventListener("click", (ev) => {
  const a = ev.target.closest("a");
  if (!a) return;
  state.cwd = a.dataset.p; resetList(); loadMore();
});

let searchTimer = null;
function onSearch() {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => { state.query = $("search").value.trim(); resetList(); loadMore(); }, 200);
}
$("search").addEventListener("input", onSearch);
$("content-mode").addEventListener("change", onSearch);

// ----------------------------------------------------------------------------------------------- viewer / editor

function highlight(text) {
  // String links are `<id::key>` or, in classic text, `<id::key`shown text`>` (docs/pvf-script-text.md).
  return esc(text).replace(/(\[[^\]\n]+\])|(&lt;\d+::[^&\s`]+(?:`[^`]*`)?&gt;)|(`[^`]*`)|(-?\b\d+(?:\.\d+)?\b)/g, (m, sec, link, str, num) => {
    if (sec) return `<span class="t-sec">${sec}</span>`;
    if (link) return `<span class="t-link">${link}</span>`;
    if (str) return `<span class="t-str">${str.replace(/&lt;\d+::[^&\s`]+&gt;/g, (l) => `<span class="t-link">${l}</span>`)}</span>`;
    return `<span class="t-num">${num}</span>`;
  });
}

async function openFile(path) {
  if (state.editing && $("editor").value !== state.text && !confirm("Drop the unsaved edit?")) return;
  stopEditing();
  showTab("files-pane");
  try {
    const r = await tool("pvf_read_file", { workspaceId: ws(), path, maxChars: 32000 });
    let text = r.kind === "text" ? r.text : `binary, ${r.size} bytes, sha256 ${r.sha256}\n\n${r.hexPreview}`;
    let next = r.nextStartLine;
    while (r.kind === "text" && next) {
      const more = await tool("pvf_read_file", { workspaceId: ws(), path, startLine: next, maxChars: 32000, expectedRevision: r.revision });
      text += more.text; next = more.nextStartLine;
    }
    state.file = r.path; state.text = text; state.kind = r.kind; state.fileRevision = r.revision;
    $("file-path").textContent = `${r.path} · ${r.kind} · rev ${r.revision}${r.changed ? " · changed" : ""}`;
    $("viewer").innerHTML = r.kind === "text" ? highlight(text) : esc(text);
    $("edit-btn").disabled = r.kind !== "text";
    renderTree();
    showError(null);
  } catch (e) { showError(e); }
}

$("viewer").addEventListener("mouseover", async (ev) => {
  const span = ev.target.closest(".t-link");
  if (!span || span.title) return;
  span.title = "…";
  try {
    const link = span.textContent.replace(/`[^`]*`/, "");
    const r = await tool("pvf_resolve", { workspaceId: ws(), link });
    span.title = r.text ?? "(unresolved)";
  } catch (e) { span.title = e.message; }
});

function startEditing() {
  state.editing = true;
  $("editor").value = state.text;
  $("editor").hidden = false; $("viewer").hidden = true;
  $("apply-btn").hidden = false; $("cancel-btn").hidden = false; $("edit-btn").hidden = true;
  reportDrafts();
}
function stopEditing() {
  state.editing = false;
  $("editor").hidden = true; $("viewer").hidden = false;
  $("apply-btn").hidden = true; $("cancel-btn").hidden = true; $("edit-btn").hidden = false;
  reportDrafts();
}
const hasDraft = () => state.editing && $("editor").value !== state.text;
function reportDrafts() { api("/api/editors/report", { method: "POST", body: JSON.stringify({ clientId: CLIENT, hasDrafts: hasDraft() }) }).catch(() => {}); }
$("edit-btn").onclick = startEditing;
$("cancel-btn").onclick = () => { stopEditing(); };
$("editor").addEventListener("input", () => { clearTimeout(state.reportTimer); state.reportTimer = setTimeout(reportDrafts, 300); });

$("apply-btn").onclick = async () => {
  try {
    const plan = await tool("pvf_edit_prepare", { workspaceId: ws(), expectedRevision: state.fileRevision, edits: [{ path: state.file, text: $("editor").value }] });
    await showPlan({ kind: "edit", id: plan.planId });
  } catch (e) { showError(e); }
};

// ----------------------------------------------------------------------------------------------- plans

const diffHtml = (d) => esc(d).split("\n").map((l) => (l.startsWith("+") ? `<span class="add">${l}</span>` : l.startsWith("-") ? `<span class="del">${l}</span>` : l)).join("\n");

function planItemHtml(it) {
  const body = it.diff ? `<pre>${diffHtml(it.diff)}</pre>` : it.binary ? `<p class="muted">${it.binary.old ? it.binary.old.size + " → " : ""}${it.binary.new ? it.binary.new.size : "deleted"} bytes</p>` : "";
  const over = it.overwrite ? " <b>(overwrites)</b>" : "";
  const req = it.requires ? ` <span class="muted">requires ${esc(it.requires.join(", "))}</span>` : "";
  return `<details open><summary><label><input type="checkbox" class="pick" value="${esc(it.changeKey)}" checked> ${esc(it.action)} ${esc(it.changeKey)}</label>${over}${req}</summary>${body}</details>`;
}

async function showPlan(plan) {
  const preview = await planTool(plan.kind, "preview", plan.id, { limit: 200 });
  state.plan = { ...plan, preview, items: [...preview.items], nextCursor: preview.nextCursor || null };
  const info = preview.plan || {};
  const who = info.owner ? ` · started by ${info.owner}` : "";
  $("plan-title").textContent = `Change plan · ${plan.kind}${who}${info.summary ? " · " + (typeof info.summary === "string" ? info.summary : JSON.stringify(info.summary)) : ""}`;
  $("plan").dataset.planId = plan.id;
  const warnings = preview.warnings.map((w) => `<label><input type="checkbox" class="ack" value="${esc(w.warningId)}"> ${esc(w.message)}</label>`);
  $("plan-items").innerHTML = `<div id="plan-list">${preview.items.map(planItemHtml).join("")}</div>` + (warnings.length ? `<h4>Warnings (tick to acknowledge)</h4>${warnings.join("")}` : "");
  if (plan.kind === "export") $("plan-items").innerHTML += `<p class="muted">Output: ${esc(plan.outputParent)}${plan.outputName ? "/" + esc(plan.outputName) : ""}</p>`;
  $("plan-rest").checked = false;
  renderPlanMore();
  $("plan").hidden = false;
}

function renderPlanMore() {
  const p = state.plan;
  const total = p.preview.total ?? p.preview.plan?.changeCount;
  $("plan-more-box").hidden = !p.nextCursor;
  if (!p.nextCursor) $("plan-rest").checked = false;
  $("plan-count").textContent = total != null ? `${p.items.length} of ${total} shown` : "";
}

$("plan-more").onclick = async () => {
  const p = state.plan;
  if (!p || !p.nextCursor) return;
  try {
    const page = await planTool(p.kind, "preview", p.id, { limit: 200, cursor: p.nextCursor });
    p.items.push(...page.items);
    p.nextCursor = page.nextCursor || null;
    $("plan-list").insertAdjacentHTML("beforeend", page.items.map(planItemHtml).join(""));
    renderPlanMore();
  } catch (e) { showError(e); }
};

function closePlan(planId) {
  if (planId && state.plan?.id !== planId) return;
  $("plan").hidden = true; state.plan = null; delete $("plan").dataset.planId;
}

$("plan-apply").onclick = async () => {
  const plan = state.plan;
  const keys = [...document.querySelectorAll(".pick:checked")].map((c) => c.value);
  const acks = [...document.querySelectorAll(".ack:checked")].map((c) => c.value);
  try {
    // "also apply the changes not shown yet": page through the rest of the plan for their changeKeys.
    for (let cursor = $("plan-rest").checked ? plan.nextCursor : null; cursor;) {
      const page = await planTool(plan.kind, "preview", plan.id, { limit: 200, cursor });
      keys.push(...page.items.map((i) => i.changeKey));
      if (plan.kind === "import") plan.items.push(...page.items);
      cursor = page.nextCursor;
    }
    if (plan.kind === "edit") {
      await planTool("edit", "apply", plan.id, { changeKeys: keys, acknowledgedWarningIds: acks });
      stopEditing();
    } else if (plan.kind === "import") {
      const overwrite = plan.items.filter((i) => i.overwrite && keys.includes(i.changeKey)).map((i) => i.changeKey);
      await planTool("import", "apply", plan.id, { changeKeys: keys, overwriteKeys: overwrite, acknowledgedWarningIds: acks });
    } else if (plan.kind === "script") {
      await planTool("script", "apply", plan.id, { expectedRevision: plan.preview.revision, changeKeys: keys, acknowledgedWarningIds: acks });
    } else {
      const out = await planTool("export", "apply", plan.id, { outputParent: plan.outputParent, outputName: plan.outputName || undefined, selectedEntryKeys: keys, acknowledgedWarningIds: acks });
      alert(`Exported ${out.files} files to ${out.outputPath}`);
    }
    closePlan();
    await refreshInfo();
    if (state.file) openFile(state.file);
  } catch (e) { showError(e); }
};
$("plan-discard").onclick = async () => {
  const plan = state.plan;
  if (!plan) return;
  await planTool(plan.kind, "discard", plan.id).catch(showError);
  closePlan();
};

// ----------------------------------------------------------------------------------------------- tabs

function showTab(paneId) {
  for (const b of document.querySelectorAll("#tabs .tab")) {
    b.classList.toggle("on", b.dataset.pane === paneId);
    $(b.dataset.pane).hidden = b.dataset.pane !== paneId;
  }
}
$("tabs").addEventListener("click", (ev) => { const b = ev.target.closest(".tab"); if (b) showTab(b.dataset.pane); });

// ----------------------------------------------------------------------------------------------- dialogs

function ask(title, fields) {
  return new Promise((resolve) => {
    $("dialog-title").textContent = title;
    $("dialog-body").innerHTML = fields.map((f) => f.options
      ? `<label>${esc(f.label)} <select name="${f.name}">${f.options.map((o) => `<option>${esc(o)}</option>`).join("")}</select></label>`
      : f.area ? `<label>${esc(f.label)}<textarea name="${f.name}" rows="3" style="width:100%">${esc(f.value || "")}</textarea></label>`
      : `<label>${esc(f.label)}<input type="text" name="${f.name}" value="${esc(f.value || "")}"></label>`).join("");
    const dlg = $("dialog");
    dlg.onclose = () => {
      if (dlg.returnValue !== "ok") return resolve(null);
      const out = {};
      for (const el of $("dialog-body").querySelectorAll("[name]")) out[el.name] = el.value;
      resolve(out);
    };
    dlg.showModal();
  });
}

async function runLifecycle(name, args) {
  try {
    const r = await tool(name, { waitSeconds: 30, ...args });
    if (r.state !== "succeeded") showError({ code: "RUNNING", message: `${name} still running (task ${r.taskId})` });
    await refreshInfo();
    return r;
  } catch (e) { showError(e); return null; }
}

$("open-btn").onclick = async () => {
  const v = await ask("Open an archive", [{ name: "path", label: "Absolute path of the .pvf" }, { name: "dirtyPolicy", label: "Unsaved changes", options: ["reject", "save", "discard"] }]);
  if (!v) return;
  const info = state.info;
  const args = info.open ? { path: v.path, workspaceId: info.workspaceId, expectedRevision: info.revision, dirtyPolicy: v.dirtyPolicy } : { path: v.path, expectedWorkspaceEpoch: info.workspaceEpoch };
  if (await runLifecycle("pvf_archive_open", args)) { state.cwd = ""; state.file = null; resetList(); loadMore(); loadHistory(); }
};
$("save-btn").onclick = async () => { await runLifecycle("pvf_archive_save", { workspaceId: ws(), expectedRevision: state.info.revision }); loadHistory(); };
$("saveas-btn").onclick = async () => {
  const v = await ask("Save a copy", [{ name: "path", label: "Absolute path of the copy" }]);
  if (v) await runLifecycle("pvf_archive_save_as", { workspaceId: ws(), expectedRevision: state.info.revision, path: v.path });
};
$("import-btn").onclick = async () => {
  const v = await ask("Import files", [{ name: "sources", label: "Absolute files or folders, one per line", area: true }, { name: "targetDir", label: "Archive folder", value: state.cwd }, { name: "mode", label: "Mode", options: ["text", "raw"] }]);
  if (!v) return;
  try {
    const plan = await tool("pvf_import_prepare", { workspaceId: ws(), expectedRevision: state.info.revision, sourcePaths: v.sources.split("\n").map((s) => s.trim()).filter(Boolean), targetDir: v.targetDir, mode: v.mode });
    await showPlan({ kind: "import", id: plan.importPlanId });
  } catch (e) { showError(e); }
};
$("export-btn").onclick = async () => {
  const v = await ask("Export", [
    { name: "source", label: "Source", options: ["selection", "memory", "working"] },
    { name: "scopes", label: "Files or folders (selection), one per line", area: true, value: state.file || state.cwd },
    { name: "format", label: "Format", options: ["direct", "110USextend", "115CN-mod"] },
    { name: "name", label: "MOD name" }, { name: "version", label: "MOD version", value: "1.0" }, { name: "modId", label: "MOD id (115CN-mod)" },
    { name: "outputParent", label: "Output folder (absolute)" }, { name: "outputName", label: "New folder name (direct)" },
  ]);
  if (!v) return;
  const mod = v.format !== "direct";
  try {
    const plan = await tool("pvf_export_prepare", { workspaceId: ws(), expectedRevision: state.info.revision, source: v.source, scopes: v.scopes.split("\n").map((s) => s.trim()).filter((s) => s !== "" || v.source === "selection"), mode: mod ? "mod" : "direct", format: mod ? v.format : undefined, name: v.name || undefined, version: v.version || undefined, modId: v.modId || undefined });
    await showPlan({ kind: "export", id: plan.exportPlanId, outputParent: v.outputParent, outputName: v.outputName });
  } catch (e) { showError(e); }
};

// ----------------------------------------------------------------------------------------------- side panels

function renderTasks() {
  const rows = [...state.tasks.values()].slice(-30).reverse().map((t) => {
    const p = t.progress || {};
    const pct = p.total ? ` ${Math.round((100 * p.done) / p.total)}%` : "";
    return `<li>${esc(t.label)} · <span class="muted">${esc(t.owner)}</span> · ${esc(t.state)}${pct}</li>`;
  });
  $("tasks").innerHTML = rows.join("") || `<li class="muted">none</li>`;
}

// Plans of every client (the engine's plans are shared): each can be shown, applied or discarded here.
function renderPlans() {
  const rows = [...state.plans.values()].map((p) => `<li>${esc(p.kind)} · <span class="muted">${esc(p.owner)}</span> · ${p.changeCount} change(s) <button class="show-plan" data-id="${esc(p.planId)}">Show</button></li>`);
  $("plans").innerHTML = rows.join("") || `<li class="muted">none</li>`;
}
$("plans").addEventListener("click", (ev) => {
  const b = ev.target.closest(".show-plan");
  const p = b && state.plans.get(b.dataset.id);
  if (p) showPlan({ kind: p.kind, id: p.planId }).catch((e) => { state.plans.delete(p.planId); renderPlans(); showError(e); });
});
async function notePendingPlan(planId, kind) {
  if (!planId || state.plans.has(planId)) return;
  try {
    const page = await planTool(kind, "preview", planId, { limit: 1 });
    // the preview names the plan's kind; `kind` is only the caller's guess (workspace info says no more than the id)
    if (page.state === "pending") state.plans.set(planId, { planId, kind: page.kind || kind, owner: page.plan?.owner || "", changeCount: page.total });
    renderPlans();
  } catch (e) { /* gone meanwhile */ }
}

async function loadHistory() {
  if (!ws()) return;
  try {
    const h = await tool("pvf_history", { workspaceId: ws(), limit: 50 });
    $("history").innerHTML = h.commits.slice().reverse().map((c) => `<li data-id="${esc(c.id)}" title="${esc(c.files.map((f) => f.action + " " + f.path).join("\n"))}">#${c.seq} ${new Date(c.time * 1000).toLocaleString()} · ${esc(c.source)} · ${c.files.length} file(s)</li>`).join("") || `<li class="muted">no saves yet</li>`;
  } catch (e) { /* history is optional */ }
}

// A saved commit's diff: what each file was before and after that save (from the archive's journal).
$("history").addEventListener("click", async (ev) => {
  const li = ev.target.closest("li[data-id]");
  if (!li) return;
  try {
    const c = await api(`/api/pvf/history/${encodeURIComponent(li.dataset.id)}?workspaceId=${encodeURIComponent(ws())}`);
    $("commit-title").textContent = `Commit #${c.seq} · ${new Date(c.time * 1000).toLocaleString()} · ${c.source} (${c.caller}) · ${c.totalFiles} file(s)`;
    $("commit-files").innerHTML = c.files.map((f) => `<h4>${esc(f.action)} ${esc(f.path)}</h4>` + (f.diff != null
      ? `<pre class="commit-diff">${diffHtml(f.diff)}${f.diffTruncated ? "\n… (cut)" : ""}</pre>`
      : `<p class="muted">binary: ${f.binary.old ? f.binary.old.size + " → " : ""}${f.binary.new ? f.binary.new.size + " bytes" : "deleted"}</p>`)).join("")
      + (c.totalFiles > c.files.length ? `<p class="muted">${c.totalFiles - c.files.length} more file(s) not shown</p>` : "");
    $("commit-dialog").showModal();
  } catch (e) { showError(e); }
});

// ----------------------------------------------------------------------------------------------- approvals
// An MCP client's change that needs the person's approval is asked in the open page first (core ApprovalBroker:
// an open event stream counts as a person who can answer), so this page shows and answers it.

const approvals = new Map();
const approvalShownAt = new Map(); // id → performance.now() when it first appeared

// When an answer counts is the platform's rule (/platform-static/approval-guard.js, shared with the markdown editor
// and the platform page); until that module has loaded, no answer counts.
let answerRule = () => false;
let tooSoon = "";
import("/platform-static/approval-guard.js").then((guard) => { answerRule = guard.answerable; tooSoon = guard.TOO_SOON; });

function answerable(id) {
  return answerRule(approvalShownAt.get(id) ?? performance.now());
}

function renderApprovals() {
  let box = $("approvals");
  if (!box) {
    box = document.createElement("div");
    box.id = "approvals";
    box.setAttribute("role", "alert");
    document.body.prepend(box);
  }
  // The diff is what the plan really changes (the summary is the agent's request); shown as text, never as HTML.
  box.innerHTML = [...approvals.values()].map((r) => `<div class="approval" data-id="${esc(r.id)}"><b>${esc(r.client)}</b> wants to run <code>${esc(r.tool)}</code> on ${esc(r.target)}: ${esc(r.summary)} <button type="button" class="approve" data-ok="1">Approve</button> <button type="button" class="reject" data-ok="0">Reject</button>${r.diff ? `<pre class="approval-diff">${esc(r.diff)}</pre>` : ""}</div>`).join("");
  box.hidden = approvals.size === 0;
  const now = performance.now();
  for (const id of approvals.keys()) if (!approvalShownAt.has(id)) approvalShownAt.set(id, now);
  for (const id of [...approvalShownAt.keys()]) if (!approvals.has(id)) approvalShownAt.delete(id);
}

async function answerApproval(id, approved) {
  await api(`/api/approvals/${encodeURIComponent(id)}`, { method: "POST", body: JSON.stringify({ approved }) }).catch(showError);
  approvals.delete(id);
  renderApprovals();
}

document.addEventListener("click", (ev) => {
  const button = ev.target.closest("#approvals button");
  if (!button) return;
  const box = button.closest(".approval");
  if (!answerable(box.dataset.id)) {
    let notice = box.querySelector(".too-soon");
    if (!notice) {
      notice = document.createElement("p");
      notice.className = "too-soon";
      notice.textContent = tooSoon || "Wait a moment, then answer.";
      box.append(notice);
    }
    return;
  }
  answerApproval(box.dataset.id, button.dataset.ok === "1");
});

async function loadApprovals() {
  const { pending } = await api("/api/approvals").catch(() => ({ pending: [] }));
  for (const r of pending || []) approvals.set(r.id, r);
  renderApprovals();
}

// ----------------------------------------------------------------------------------------------- events

function listen() {
  // The platform's one editor protocol (core/lifecycle.py DraftBarrier): this tab is asked before every save
  // or close exactly while this stream is open, and answers on /api/editors/ack.
  const events = new EventSource(`/api/events?editor=${encodeURIComponent(CLIENT)}`);
  events.addEventListener("task", (ev) => {
    const t = JSON.parse(ev.data);
    state.tasks.set(t.taskId, t); renderTasks();
    if (t.event === "finished") refreshInfo().catch(() => {});
    document.dispatchEvent(new CustomEvent("pvf-task", { detail: t }));
  });
  events.addEventListener("settings", () => document.dispatchEvent(new CustomEvent("pvf-settings")));
  events.addEventListener("plan", (ev) => {
    const d = JSON.parse(ev.data);
    if (d.event === "created") {
      if (!PLAN_KINDS.has(d.kind) || d.kind === "export") return; // an export plan needs its output folder: its client executes it
      state.plans.set(d.planId, { ...d, state: "pending" });
      renderPlans();
      if (!state.plan) showPlan({ kind: d.kind, id: d.planId }).catch(showError);
    } else if (d.event === "applied" || d.event === "discarded") {
      state.plans.delete(d.planId); renderPlans();
      closePlan(d.planId);
    }
  });
  events.addEventListener("workspace", async (ev) => {
    const d = JSON.parse(ev.data);
    await refreshInfo().catch(() => {});
    if (d.event === "opened" || d.event === "closed") { state.cwd = ""; state.file = null; resetList(); loadMore(); $("viewer").textContent = ""; }
    else if (d.event === "committed") { resetList(); loadMore(); if (state.file && !state.editing && (d.keys || []).some((k) => k.toLowerCase() === state.file.toLowerCase())) openFile(state.file); }
    if (d.event === "saved") loadHistory();
  });
  events.addEventListener("ui", async (ev) => {
    const d = JSON.parse(ev.data);
    if (d.event === "prepare" && (d.clients || []).includes(CLIENT)) {
      await api("/api/editors/ack", { method: "POST", body: JSON.stringify({ operationId: d.operationId, clientId: CLIENT, hasDrafts: hasDraft(), detail: hasDraft() ? { path: state.file } : null }) }).catch(() => {});
    }
  });
  events.addEventListener("approval", (ev) => {
    const d = JSON.parse(ev.data);
    if (d.event === "requested" && d.request) approvals.set(d.request.id, d.request);
    else if (d.id) approvals.delete(d.id);
    renderApprovals();
  });
  events.onerror = () => showError({ code: "DISCONNECTED", message: "lost the connection to deskbridge; retrying…" });
  events.onopen = () => { showError(null); loadApprovals(); };
}

async function main() {
  try {
    listen();
    for (let i = 0; i < 100; i++) {
      const info = await refreshInfo();
      if (!info.lifecycle) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    for (const t of state.info.runningTasks || []) state.tasks.set(t.taskId, t);
    renderTasks();
    renderPlans();
    if (state.info.pendingPlan) await notePendingPlan(state.info.pendingPlan, "script");
    for (const t of state.info.runningTasks || []) document.dispatchEvent(new CustomEvent("pvf-task", { detail: { ...t, event: "started" } }));
    if (state.info.open) { loadMore(); loadHistory(); }
    document.body.dataset.ready = "1";
  } catch (e) { showError(e); }
}
main();
