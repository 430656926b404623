// Annotations in the PVF viewer (docs/pvf-annotations.md): every opened script is explained with
// pvf_explain_file; annotated tokens get a hover card, enum labels and reference names show inline after the
// value, references are links that open the target file, an .equ gets an item card, and a rules panel
// searches the rules (pvf_annotation_search / pvf_annotation_detail). Loaded after pvf.js and uses its
// globals (tool, state, ws, esc, highlight, openFile); it wraps openFile, so every way a file is (re)opened
// is annotated. Annotations are an aid: when explaining fails the plain viewer stays.
"use strict";
(() => {
  const ann = {
    lang: (navigator.language || "en").toLowerCase().startsWith("zh") ? "zh-CN" : "en",
    marks: [],
    seq: 0,
  };

  // -------------------------------------------------------------------------------------------- layout

  const panel = document.createElement("section");
  panel.id = "ann-panel";
  panel.innerHTML = `<h2>Annotation rules</h2>
    <div class="ann-row"><input id="ann-q" placeholder="Search rules: id, title, label…" autocomplete="off">
    <select id="ann-lang" title="Language of annotations"><option value="zh-CN">中文</option><option value="en">English</option></select></div>
    <div id="ann-refused"></div><ul id="ann-rules"></ul><div id="ann-detail" hidden></div>
    <details id="ann-edit"><summary>Edit user rules</summary>
      <div class="ann-row"><select id="ann-file"></select><input id="ann-new" placeholder="new-file.json"></div>
      <textarea id="ann-text" rows="12" spellcheck="false"></textarea>
      <div class="ann-row"><button id="ann-preview">Preview on this file</button><button id="ann-save">Save</button></div>
      <div id="ann-status" class="muted"></div></details>`;
  $("right").prepend(panel);
  $("ann-lang").value = ann.lang;
  const card = document.createElement("div");
  card.id = "item-card";
  card.hidden = true;
  $("viewer").before(card);
  const tip = document.createElement("div");
  tip.id = "ann-tip";
  tip.hidden = true;
  document.body.append(tip);

  // -------------------------------------------------------------------------------------------- viewer

  const baseOpen = openFile;
  // eslint-disable-next-line no-global-assign
  openFile = async function (path) {
    await baseOpen(path);
    await annotate();
  };

  async function explainAll(file) {
    const pages = [];
    let cursor;
    do {
      const args = { workspaceId: ws(), path: file, lang: ann.lang, limit: 200, expectedRevision: state.fileRevision };
      if (ann.draft != null) args.draftRules = ann.draft;
      if (cursor) args.cursor = cursor;
      const page = await tool("pvf_explain_file", args);
      pages.push(page);
      cursor = page.nextCursor;
    } while (cursor && pages.length < 50);
    return pages;
  }

  async function annotate() {
    const seq = ++ann.seq;
    linkTitles.clear();
    const file = state.file;
    card.hidden = true;
    ann.marks = [];
    if (!file || state.kind !== "text" || !ws()) return;
    let pages;
    try { pages = await explainAll(file); } catch (e) {
      if (ann.draft != null) status(`draft refused: ${e.data?.jsonPath || ""} ${e.message}`, true);
      return;
    }
    if (seq !== ann.seq || state.file !== file || state.editing) return;
    const marks = [];
    for (const p of pages) {
      for (const s of p.sections || []) {
        if (s.offset != null) {
          const first = s.annotation || s.tokens[0];
          marks.push({ offset: s.offset, length: s.length, sec: s, a: s.annotation || null, hint: s.known ? (first ? first.title : "") : "", unknown: !s.known });
        }
        for (const t of s.tokens) if (t.offset != null) marks.push({ offset: t.offset, length: t.length, sec: s, a: t, hint: tokenHint(t) });
      }
    }
    marks.sort((x, y) => x.offset - y.offset);
    ann.marks = marks;
    render();
    if (/\.equ$/i.test(file)) itemCard(pages);
    document.body.dataset.annotated = file;
  }

  function tokenHint(t) {
    if (t.type === "enum") return t.label ?? "?";
    if (t.type === "reference") return t.reference?.resolved ? (t.reference.name || t.reference.path) : "✗";
    if (t.text) return t.text;
    return "";
  }

  function render() {
    const text = state.text;
    let html = "";
    let pos = 0;
    ann.marks.forEach((m, i) => {
      if (m.offset < pos) return;
      html += highlight(text.slice(pos, m.offset));
      const seg = text.slice(m.offset, m.offset + m.length);
      const a = m.a;
      const cls = ["ann", a ? `ann-${a.type}` : "ann-section", m.unknown ? "ann-unknown" : ""].join(" ");
      const rule = a ? ` data-rule="${esc(a.ruleId)}"` : "";
      html += `<span class="${cls}" data-m="${i}"${rule}>${highlight(seg)}</span>`;
      if (m.hint) {
        const ref = a && a.type === "reference" && a.reference?.resolved;
        html += ref
          ? `<a class="ann-hint ann-link" data-path="${esc(a.reference.path)}">${esc(m.hint)}</a>`
          : `<span class="ann-hint${a ? "" : " sec"}">${esc(m.hint)}</span>`;
      }
      pos = m.offset + m.length;
    });
    html += highlight(text.slice(pos));
    $("viewer").innerHTML = html;
    applyLinkTitles();
  }

  // pvf.js resolves a string link's text on hover into the span's title; re-rendering replaces the spans, so
  // keep what was resolved and give it to the new spans (also when the answer arrives after the re-render).
  const linkTitles = new Map();
  function applyLinkTitles() {
    for (const el of $("viewer").querySelectorAll(".t-link")) {
      const t = linkTitles.get(el.textContent);
      if (t) el.title = t;
    }
  }
  $("viewer").addEventListener("mouseover", async (ev) => {
    const span = ev.target.closest(".t-link");
    if (!span || !ws()) return;
    const key = span.textContent;
    if (linkTitles.has(key)) return;
    linkTitles.set(key, "");
    try {
      const r = await tool("pvf_resolve", { workspaceId: ws(), link: key.replace(/`[^`]*`/, "") });
      linkTitles.set(key, r.text ?? "(unresolved)");
    } catch (e) { linkTitles.set(key, e.message); }
    applyLinkTitles();
  });

  function tipHtml(m) {
    const a = m.a;
    if (!a) {
      if (m.unknown) return `<b>[${esc(m.sec.name)}]</b><div class="muted">No rule covers this section.</div>`;
      const t = m.sec.tokens[0];
      return `<b>[${esc(m.sec.name)}]</b>${t ? `<div>${esc(t.title)} <span class="muted">${esc(t.ruleId)}</span></div>` : ""}`;
    }
    const rows = [`<b>${esc(a.title)}</b> <span class="muted">${esc(a.type)} · ${esc(a.ruleId)}</span>`];
    if (a.content) rows.push(`<div>${esc(a.content)}</div>`);
    if (a.value != null) rows.push(`<div>value <code>${esc(a.value)}</code>${a.unit ? " " + esc(a.unit) : ""}</div>`);
    if (a.type === "enum") rows.push(`<div class="ann-label">${esc(a.label ?? "unknown value")}</div>`);
    if (a.reference) {
      const r = a.reference;
      rows.push(r.resolved
        ? `<div>${esc(r.relationTitle)} → <code>${esc(r.path)}</code>${r.name ? " " + esc(r.name) : ""}</div><div class="muted">via ${esc(r.listPath)}${r.context ? " (" + esc(r.context) + ")" : ""}</div>`
        : `<div class="ann-bad">${esc(r.relationTitle || r.relation)}: ${esc(r.reason)}</div>`);
    }
    if (a.target) rows.push(`<div><code>${esc(a.target.path)}</code> ${a.target.exists ? "" : "(missing)"}</div>`);
    if (a.image) rows.push(`<div>image <code>${esc(a.image.path)}</code>${a.image.frame != null ? " frame " + a.image.frame : ""}</div>`);
    if (a.text) rows.push(`<div>“${esc(a.text)}”</div>`);
    if (a.alsoMatched) rows.push(`<div class="muted">also: ${esc(a.alsoMatched.join(", "))}</div>`);
    return rows.join("");
  }

  $("viewer").addEventListener("mouseover", (ev) => {
    const span = ev.target.closest(".ann");
    if (!span) return;
    const m = ann.marks[Number(span.dataset.m)];
    if (!m) return;
    tip.innerHTML = tipHtml(m);
    const r = span.getBoundingClientRect();
    tip.style.left = `${Math.round(r.left)}px`;
    tip.style.top = `${Math.round(r.bottom + 4)}px`;
    tip.hidden = false;
  });
  $("viewer").addEventListener("mouseout", (ev) => { if (ev.target.closest(".ann")) tip.hidden = true; });
  $("viewer").addEventListener("click", (ev) => {
    const link = ev.target.closest(".ann-link");
    const span = ev.target.closest(".ann-reference");
    const path = link ? link.dataset.path : span ? ann.marks[Number(span.dataset.m)]?.a?.reference?.path : null;
    if (path) { tip.hidden = true; openFile(path); }
  });

  // -------------------------------------------------------------------------------------------- item card

  function itemCard(pages) {
    const byRule = new Map();
    const sections = [];
    for (const p of pages) for (const s of p.sections || []) {
      sections.push(s);
      for (const t of s.tokens) { if (!byRule.has(t.ruleId)) byRule.set(t.ruleId, []); byRule.get(t.ruleId).push(t); }
    }
    const one = (id) => (byRule.get(id) || [])[0];
    const name = one("equ.name");
    if (!name) return;
    const rarity = one("equ.rarity");
    const level = one("equ.minimum-level");
    const jobs = (byRule.get("equ.usable-job") || []).map((t) => t.label || t.value);
    const icon = one("equ.icon");
    const attrs = [];
    for (const s of sections) {
      if (s.annotation && /^equ\.(equipment-|separate-attack)/.test(s.annotation.ruleId)) attrs.push(`${s.annotation.title} ${s.values.join(" ~ ")}`);
    }
    for (const [id, list] of byRule) {
      if (!/^equ\.(physical|magical|anti-evil|attack-speed|cast-speed|add-|stuck)/.test(id)) continue;
      const t = list[0];
      const v = Number(t.value);
      attrs.push(`${t.title} ${v > 0 ? "+" : ""}${t.value}${t.unit || ""}`);
    }
    const level_ = level ? `Lv ${esc(level.value)}` : "";
    card.className = rarity ? `rarity-${rarity.value}` : "";
    card.innerHTML = `<div class="ic-icon" title="${esc(icon ? icon.image.path : "")}">${icon ? `${esc(icon.image.path.split("/").pop())}<br>#${esc(icon.image.frame)}` : "?"}</div>
      <div class="ic-body"><div class="ic-name">${esc(name.text || name.value)}</div>
      <div class="ic-meta">${esc(rarity ? rarity.label || rarity.value : "")}${level_ ? " · " + level_ : ""}${jobs.length ? " · " + esc(jobs.join(", ")) : ""}</div>
      <ul class="ic-attrs">${attrs.map((a) => `<li>${esc(a)}</li>`).join("")}</ul></div>`;
    card.hidden = false;
  }

  // -------------------------------------------------------------------------------------------- rules panel

  async function searchRules() {
    try {
      const r = await tool("pvf_annotation_search", { query: $("ann-q").value.trim(), lang: ann.lang, limit: 50 });
      $("ann-rules").innerHTML = r.rules.map((x) => `<li data-id="${esc(x.ruleId)}"><code>${esc(x.ruleId)}</code> ${esc(x.title)}${x.origin !== "builtin" ? ` <span class="pill">${esc(x.origin)}</span>` : ""}</li>`).join("")
        + (r.nextCursor ? `<li class="muted">${r.total} rules: refine the search</li>` : "");
      $("ann-refused").innerHTML = r.refusedFiles.map((f) => `<div class="ann-bad">refused ${esc(f.file)}: ${esc(f.jsonPath)} ${esc(f.message)}</div>`).join("");
    } catch (e) { showError(e); }
  }
  let timer = null;
  $("ann-q").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(searchRules, 200); });
  $("ann-lang").addEventListener("change", () => { ann.lang = $("ann-lang").value; searchRules(); if (state.file) annotate(); });
  $("ann-rules").addEventListener("click", async (ev) => {
    const li = ev.target.closest("li[data-id]");
    if (!li) return;
    try {
      const d = await tool("pvf_annotation_detail", { ruleId: li.dataset.id, workspaceId: ws() || undefined, lang: ann.lang });
      const t = d.rule.target;
      const where = [t.kind, t.section ? `[${t.section}]` : "", t.index != null ? `#${t.index}` : "", t.recordTokens ? `records of ${t.recordTokens}` : ""].filter(Boolean).join(" ");
      const ex = d.examples.map((e) => `<li><a class="ann-ex" data-path="${esc(e.path)}">${esc(e.path)}</a></li>`).join("");
      $("ann-detail").innerHTML = `<b>${esc(d.title)}</b> <span class="muted">${esc(d.origin)} · priority ${d.priority}</span>
        <div>${esc((d.rule.match.extensions || ["any file"]).join(" "))} · ${esc(where)} · ${esc(d.rule.annotation.type)}</div>
        ${d.rule.source ? `<div class="muted">source: ${esc(d.rule.source)}</div>` : ""}${ex ? `<ul>${ex}</ul>` : ""}`;
      $("ann-detail").hidden = false;
    } catch (e) { showError(e); }
  });
  $("ann-detail").addEventListener("click", (ev) => {
    const a = ev.target.closest(".ann-ex");
    if (a) openFile(a.dataset.path);
  });
  // -------------------------------------------------------------------------------------------- editing user rules

  const TEMPLATE = JSON.stringify({
    format: "deskbridge-pvf-annotations", version: 1,
    rules: [{ id: "mine.example", match: { extensions: [".equ"] }, target: { kind: "token", section: "rarity", index: 0 },
      annotation: { title: { "zh-CN": "我的稀有度", en: "My rarity" }, type: "enum", values: { 4: { "zh-CN": "史诗", en: "Epic" } } } }],
  }, null, 2);
  const edit = { file: null, sha: "" };
  function status(text, bad = false) { $("ann-status").textContent = text; $("ann-status").className = bad ? "ann-bad" : "muted"; }

  async function listFiles() {
    const r = await tool("pvf_annotation_rules_get", {});
    $("ann-file").innerHTML = `<option value="">(new file)</option>` + r.files.map((f) => `<option value="${esc(f.fileName)}">${esc(f.fileName)}${f.refused ? " ✗" : ""}</option>`).join("");
    $("ann-file").value = edit.file || "";
  }
  async function loadFile() {
    edit.file = $("ann-file").value || null;
    if (!edit.file) { edit.sha = ""; $("ann-text").value = TEMPLATE; $("ann-new").hidden = false; status("A new rule file: name it, preview, save."); return; }
    const r = await tool("pvf_annotation_rules_get", { fileName: edit.file });
    edit.sha = r.sha256; $("ann-text").value = r.text; $("ann-new").hidden = true;
    status(r.refused ? `refused: ${r.refused.jsonPath} ${r.refused.message}` : "loaded", Boolean(r.refused));
  }
  $("ann-edit").addEventListener("toggle", () => { if ($("ann-edit").open) listFiles().then(loadFile).catch(showError); });
  $("ann-file").addEventListener("change", () => loadFile().catch(showError));
  $("ann-preview").onclick = async () => {
    ann.draft = $("ann-text").value;
    status("previewing the draft on the open file (not saved)");
    await annotate();
  };
  $("ann-save").onclick = async () => {
    const name = edit.file || $("ann-new").value.trim();
    try {
      const r = await tool("pvf_annotation_rules_save", { fileName: name, text: $("ann-text").value, expectedSha256: edit.sha });
      edit.file = r.fileName; edit.sha = r.sha256; ann.draft = null;
      status(`saved ${r.fileName}: ${r.rules} rule(s), priority ${r.priority}`);
      await listFiles(); $("ann-new").hidden = true;
      searchRules(); await annotate();
    } catch (e) { status(`${e.code}: ${e.data?.jsonPath ? e.data.jsonPath + " " : ""}${e.message}`, true); }
  };

  searchRules();
})();
