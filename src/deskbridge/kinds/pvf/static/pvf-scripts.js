// The script workspace: a `.pvf.js` editor whose completion comes from the API's own `.d.ts` (pvf_script_help,
// topic "types" — the declarations a test keeps equal to the runtime), the person's library of saved scripts
// (/api/pvf/scripts), run with progress and log (pvf_script_run / pvf_script_status / pvf_script_cancel) and the
// plan in the shared plan panel (pvf.js: per-change checkboxes, apply / discard).
// Runs and plans are the engine's: a run an AI client starts shows its progress and log here and its plan in the
// plan panel; the editor's text is the person's and no run, theirs or an AI's, ever replaces it.
"use strict";

const script = { name: "", sha: null, task: null, following: new Set(), dts: null };

// ----------------------------------------------------------------------------------------------- library

async function loadLibrary() {
  try {
    const lib = await api("/api/pvf/scripts");
    $("script-lib").innerHTML = lib.scripts.map((s) => `<li><a data-name="${esc(s.name)}" title="${esc(s.name)} · ${s.size} bytes">${esc(s.name)}</a><button class="script-del" data-name="${esc(s.name)}" title="Delete">×</button></li>`).join("")
      || `<li class="muted">none saved yet</li>`;
  } catch (e) { showError(e); }
}

const scriptUrl = (name) => `/api/pvf/scripts/${encodeURIComponent(name)}`;

$("script-lib").addEventListener("click", async (ev) => {
  const del = ev.target.closest(".script-del");
  const link = ev.target.closest("a[data-name]");
  try {
    if (del) {
      if (!confirm(`Delete the saved script ${del.dataset.name}?`)) return;
      await api(scriptUrl(del.dataset.name), { method: "DELETE" });
      if (script.name === del.dataset.name) script.sha = null;
      await loadLibrary();
    } else if (link) {
      if (scriptDirty() && !confirm("Replace the script in the editor (its changes are not saved)?")) return;
      const s = await api(scriptUrl(link.dataset.name));
      setScript(s.name, s.source, s.sha256);
    }
    showError(null);
  } catch (e) { showError(e); }
});

function setScript(name, source, sha) {
  script.name = name; script.sha = sha; script.saved = source;
  $("script-name").value = name;
  $("script-src").value = source;
}
const scriptDirty = () => $("script-src").value !== (script.saved ?? "");

$("script-new").onclick = () => {
  if (scriptDirty() && !confirm("Start a new script (the changes in the editor are not saved)?")) return;
  setScript("", "", null);
};

$("script-save").onclick = async () => {
  let name = $("script-name").value.trim();
  if (name && !name.endsWith(".pvf.js")) name += ".pvf.js";
  if (!name) { showError({ code: "INVALID_ARGUMENT", message: "name the script first (e.g. raise-prices.pvf.js)" }); return; }
  try {
    const source = $("script-src").value;
    // Saving over a script loaded from the library checks it has not changed meanwhile (another tab).
    const expected = name === script.name ? script.sha ?? "" : undefined;
    const r = await api(scriptUrl(name), { method: "PUT", body: JSON.stringify({ source, expectedSha256: expected }) });
    setScript(name, source, r.sha256);
    $("script-state").textContent = `saved ${name}`;
    await loadLibrary();
    showError(null);
  } catch (e) { showError(e); }
};

// ----------------------------------------------------------------------------------------------- run

const logLine = (text, cls = "") => {
  const log = $("script-log");
  log.insertAdjacentHTML("beforeend", `<span class="${cls}">${esc(text)}</span>\n`);
  log.scrollTop = log.scrollHeight;
};

$("script-check").onclick = async () => {
  try {
    const r = await tool("pvf_script_validate", { source: $("script-src").value });
    $("script-log").textContent = "";
    if (r.ok) logLine("syntax OK");
    for (const d of r.diagnostics) logLine(`${d.line}:${d.column} ${d.message}`, "err");
    showError(null);
  } catch (e) { showError(e); }
};

$("script-run").onclick = async () => {
  try {
    const r = await tool("pvf_script_run", { workspaceId: ws(), expectedRevision: state.info.revision, source: $("script-src").value, label: script.name || $("script-name").value || undefined });
    followRun(r.taskId, r.owner);
    showError(null);
  } catch (e) { showError(e); }
};

$("script-cancel").onclick = async () => {
  if (!script.task) return;
  try { await tool("pvf_script_cancel", { taskId: script.task }); } catch (e) { showError(e); }
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function followRun(taskId, owner) {
  if (script.following.has(taskId)) return;
  script.following.add(taskId);
  script.task = taskId;
  $("script-log").textContent = "";
  logLine(`run ${taskId} started by ${owner || "?"}`, "muted");
  $("script-cancel").hidden = false;
  $("script-run").disabled = true;
  let cursor = null;
  try {
    for (;;) {
      const st = await tool("pvf_script_status", { taskId, logCursor: cursor || undefined });
      for (const e of st.log.entries) logLine(e.text);
      cursor = st.log.nextCursor;
      const p = st.progress || {};
      $("script-progress").max = p.total || 1;
      $("script-progress").value = p.total ? p.done : 0;
      const running = !["succeeded", "failed", "cancelled"].includes(st.state);
      $("script-state").textContent = `${st.state}${p.total ? ` · ${p.done}/${p.total}` : ""}${running && p.message ? " · " + p.message : ""}`;
      if (st.log.hasMore) continue;
      if (["succeeded", "failed", "cancelled"].includes(st.state)) {
        if (st.error) logLine(`${st.error.code}: ${st.error.message}`, "err");
        const r = st.result || {};
        if (st.state === "succeeded") logLine(st.planId ? `plan ${st.planId}: ${r.changes ?? "?"} change(s) to review` : "finished: no changes (read-only run)");
        if (st.planId && state.plan?.id !== st.planId) await showPlan({ kind: "script", id: st.planId }).catch(showError);
        break;
      }
      await sleep(250);
    }
  } catch (e) { showError(e); }
  finally {
    if (script.task === taskId) { script.task = null; $("script-cancel").hidden = true; }
    $("script-run").disabled = !state.info?.open;
  }
}

// Runs started anywhere (another tab, an AI client) are followed too, so their progress and log show here.
document.addEventListener("pvf-task", (ev) => {
  const t = ev.detail;
  if (t.label === "pvf_script_run" && (t.event === "queued" || t.event === "started") && !t.finished) followRun(t.taskId, t.owner);
});

// ----------------------------------------------------------------------------------------------- completion

// The `.d.ts` as data: interface name → members ({name, sig, type}), and `declare const x: T` globals.
function parseDts(text) {
  const ifaces = {};
  const globals = {};
  for (const m of text.matchAll(/interface\s+(\w+)\s*\{([\s\S]*?)\n\}/g)) {
    const members = [];
    for (const raw of m[2].split("\n")) {
      const line = raw.trim();
      const mm = /^(?:readonly\s+)?(\w+)\??\s*(\(|:)/.exec(line);
      if (!mm) continue;
      let type = "";
      if (mm[2] === "(") {
        const close = line.lastIndexOf("):");
        type = close >= 0 ? line.slice(close + 2) : "";
      } else type = line.slice(mm[0].length);
      members.push({ name: mm[1], sig: line.replace(/;$/, ""), type: type.replace(/;$/, "").trim(), method: mm[2] === "(" });
    }
    ifaces[m[1]] = members;
  }
  for (const m of text.matchAll(/declare\s+const\s+(\w+)\s*:\s*(\w+)/g)) globals[m[1]] = m[2];
  return { ifaces, globals };
}

// "PvfFile[] " → {name: "PvfFile", array: true}; "PvfSection | null" → {name: "PvfSection"}.
function typeRef(type) {
  const t = (type || "").replace(/\|\s*null/g, "").trim();
  const m = /^(\w+)(\[\])?$/.exec(t);
  return m ? { name: m[1], array: !!m[2] } : null;
}

// The receiver chain before a dot, back from `end`: `pvf.glob("x")[0]` → [{pvf}, {glob, call, index}].
function chainBefore(src, end) {
  const parts = [];
  let i = end;
  for (let guard = 0; guard < 20; guard++) {
    let j = i;
    let call = false;
    let index = false;
    while (j > 0 && (src[j - 1] === ")" || src[j - 1] === "]")) {
      const close = src[j - 1];
      const open = close === ")" ? "(" : "[";
      let depth = 0;
      let k = j - 1;
      for (; k >= 0; k--) {
        if (src[k] === close) depth++;
        else if (src[k] === open && --depth === 0) break;
      }
      if (k < 0) return null;
      if (open === "(") call = true; else index = true;
      j = k;
    }
    let k = j;
    while (k > 0 && /[\w$]/.test(src[k - 1])) k--;
    const name = src.slice(k, j);
    if (!name) return null;
    parts.unshift({ name, call, index });
    if (k > 0 && src[k - 1] === ".") { i = k - 1; continue; }
    return { parts, start: k };
  }
  return null;
}

// The declared type of an expression chain, following globals, `const x = …` / `for (const x of …)` and
// each member's declared return type.
function typeOfChain(src, parts, depth = 0) {
  const { ifaces, globals } = script.dts;
  if (!parts.length || depth > 4) return null;
  const [head, ...rest] = parts;
  let ref = globals[head.name] ? { name: globals[head.name], array: false } : null;
  if (!ref) {
    const decls = [...src.matchAll(new RegExp(`(?:const|let|var)\\s+${head.name}\\s*(=|of)\\s*([^;\\n]+)`, "g"))];
    const d = decls.pop();
    if (d) {
      let expr = d[2].trim();
      if (d[1] === "of") expr = expr.replace(/\{\s*$/, "").trim().replace(/\)$/, "");
      const inner = chainBefore(expr, expr.length);
      ref = inner ? typeOfChain(src, inner.parts, depth + 1) : null;
      if (ref && d[1] === "of") ref = ref.array ? { name: ref.name, array: false } : null;
    }
  }
  if (ref && head.index) ref = ref.array ? { name: ref.name, array: false } : null;
  for (const part of rest) {
    if (!ref || ref.array) return null;
    const member = (ifaces[ref.name] || []).find((m) => m.name === part.name);
    if (!member) return null;
    ref = typeRef(member.type);
    if (ref && part.index) ref = ref.array ? { name: ref.name, array: false } : null;
  }
  return ref;
}

function completions(src, pos) {
  const { ifaces, globals } = script.dts;
  let k = pos;
  while (k > 0 && /[\w$]/.test(src[k - 1])) k--;
  const prefix = src.slice(k, pos);
  let members;
  if (k > 0 && src[k - 1] === ".") {
    const chain = chainBefore(src, k - 1);
    const ref = chain && typeOfChain(src, chain.parts);
    if (ref && !ref.array && ifaces[ref.name]) members = ifaces[ref.name];
    else {
      // Unknown receiver: every member of every declared interface, once each.
      const seen = new Map();
      for (const list of Object.values(ifaces)) for (const m of list) if (!seen.has(m.name)) seen.set(m.name, m);
      members = [...seen.values()];
    }
  } else {
    members = Object.entries(globals).map(([name, type]) => ({ name, sig: `${name}: ${type}`, method: false }));
  }
  const lower = prefix.toLowerCase();
  return { from: k, items: members.filter((m) => m.name.toLowerCase().startsWith(lower)).sort((a, b) => a.name.localeCompare(b.name)) };
}

const popup = { open: false, items: [], from: 0, sel: 0 };

// Where the caret is, in pixels inside the textarea (a mirror element with the same text and font).
function caretXY(ta, pos) {
  const mirror = document.createElement("div");
  const cs = getComputedStyle(ta);
  for (const p of ["font", "padding", "border", "whiteSpace", "tabSize", "lineHeight", "letterSpacing"]) mirror.style[p] = cs[p];
  Object.assign(mirror.style, { position: "absolute", visibility: "hidden", whiteSpace: "pre", top: "0", left: "0" });
  mirror.textContent = ta.value.slice(0, pos);
  const mark = document.createElement("span");
  mark.textContent = "\u200b";
  mirror.appendChild(mark);
  document.body.appendChild(mirror);
  const xy = { x: mark.offsetLeft - ta.scrollLeft, y: mark.offsetTop - ta.scrollTop + mark.offsetHeight };
  mirror.remove();
  return xy;
}

function openCompletion(force) {
  const ta = $("script-src");
  if (!script.dts) return closeCompletion();
  const pos = ta.selectionStart;
  const { from, items } = completions(ta.value, pos);
  const afterDot = from > 0 && ta.value[from - 1] === ".";
  if (!items.length || (!force && !afterDot)) return closeCompletion();
  Object.assign(popup, { open: true, items: items.slice(0, 100), from, sel: 0 });
  const { x, y } = caretXY(ta, pos);
  const box = $("script-complete");
  box.style.left = `${Math.max(0, x)}px`;
  box.style.top = `${Math.max(0, y)}px`;
  renderCompletion();
  box.hidden = false;
}

function renderCompletion() {
  $("script-complete").innerHTML = popup.items.map((m, i) => `<li class="${i === popup.sel ? "on" : ""}" data-i="${i}">${esc(m.name)}${m.method ? "()" : ""}<span class="sig">${esc(m.sig)}</span></li>`).join("");
  $("script-complete").querySelector("li.on")?.scrollIntoView({ block: "nearest" });
}

function closeCompletion() {
  popup.open = false;
  $("script-complete").hidden = true;
}

function acceptCompletion(i = popup.sel) {
  const m = popup.items[i];
  const ta = $("script-src");
  if (!m) return closeCompletion();
  const insert = m.method ? `${m.name}(` : m.name;
  ta.setRangeText(insert, popup.from, ta.selectionStart, "end");
  closeCompletion();
  ta.focus();
}

$("script-src").addEventListener("keydown", (ev) => {
  if (ev.key === " " && ev.ctrlKey) { ev.preventDefault(); openCompletion(true); return; }
  if (ev.key === "Tab" && !popup.open) { ev.preventDefault(); $("script-src").setRangeText("  ", $("script-src").selectionStart, $("script-src").selectionEnd, "end"); return; }
  if (!popup.open) return;
  if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
    ev.preventDefault();
    popup.sel = (popup.sel + (ev.key === "ArrowDown" ? 1 : popup.items.length - 1)) % popup.items.length;
    renderCompletion();
  } else if (ev.key === "Enter" || ev.key === "Tab") { ev.preventDefault(); acceptCompletion(); }
  else if (ev.key === "Escape") { ev.preventDefault(); closeCompletion(); }
});
$("script-src").addEventListener("input", () => { if (popup.open || /\.$/.test($("script-src").value.slice(0, $("script-src").selectionStart))) openCompletion(popup.open); });
$("script-src").addEventListener("blur", () => setTimeout(closeCompletion, 150));
$("script-complete").addEventListener("mousedown", (ev) => { const li = ev.target.closest("li"); if (li) { ev.preventDefault(); acceptCompletion(Number(li.dataset.i)); } });

// ----------------------------------------------------------------------------------------------- start

async function scriptsMain() {
  try {
    const types = await tool("pvf_script_help", { topic: "types" });
    script.dts = parseDts(types.text);
  } catch (e) { showError(e); }
  loadLibrary();
  const poll = setInterval(() => {
    if (document.body.dataset.ready !== "1") return;
    clearInterval(poll);
    $("script-run").disabled = !state.info?.open;
    document.body.dataset.scriptsReady = "1";
  }, 50);
}
document.addEventListener("pvf-info", () => { if (!script.task) $("script-run").disabled = !state.info?.open; });
scriptsMain();
