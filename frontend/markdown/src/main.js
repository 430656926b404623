// The deskbridge Markdown editor page: wires the source editor, live preview, sidebar, status bar, menus, view
// state (shared with the server's UiState and the md_ui_* tools), events from the server, and the panels.

import './styles/app.css';
import './styles/typography.css';
import { EditorView } from '@codemirror/view';
import { Transaction } from '@codemirror/state';
import { openSearchPanel, closeSearchPanel } from '@codemirror/search';
import { api, onRequestOk } from './api.js';
import { DocSync, aiStep, expectEcho, rebaseUnsynced } from './collab.js';
import { createState, setLineNumbers, setPhrases, outlineOf, countText } from './editor.js';
import { runEditorCommand, prepareCommand } from './commands.js';
import { offerConnect } from './onboarding.js';
import { shortcutsPanel } from './shortcuts.js';
import { closeDocument, deleteFile, handleImageInput, newFile, recentPanel, rememberRecent, renameFile, saveDocumentAs } from './files.js';
import { showPreview, scrollPreviewToLine, mountPreviewFrame } from './preview.js';
import { h, icon, menu, retranslate, toast } from './dom.js';
import { t, setLanguage, LANGUAGES, THEMES, TYPOGRAPHIES } from './i18n.js';
import { mcpState } from './status.js';
import { openPanel, showApproval, closeApproval, refreshAudit, exportDocument, copyRich, deliverClipboard } from './panels.js';

const app = {
  clientId: `ui-${Math.random().toString(36).slice(2, 10)}`,
  ui: {
    theme: 'system', typography: 'Simple', cultureName: 'en-US', isCompactLayout: false, isSidebarVisible: true,
    selectedSidebarTab: 'outline', isPreviewVisible: true, isSourceMode: true, showLineNumbers: true,
    isStatusBarVisible: true, allowRemoteImages: false,
  },
  preview: null, // the <article> inside the sandboxed preview frame (preview.js mountPreviewFrame)
  remoteLoaded: new Set(), // remote images the person clicked to load
  docId: null,
  doc: null,
  view: null,
  sync: null,
  serverDirty: false,
  status: null,
  settings: null,
  outline: [],
  previewVersion: -1,
};
window.deskbridge = app; // for people debugging in the console, and for the browser tests

// Keystrokes the server has not accepted yet live only in this tab (everything it has accepted, saved or not, the
// server keeps): closing or reloading the tab then would lose them without a word, so ask the browser to confirm.
window.addEventListener('beforeunload', (event) => {
  if (app.sync && !app.sync.closed && app.sync.pending() > 0) {
    event.preventDefault();
    event.returnValue = ''; // Chromium before 119 asks only when returnValue is set
  }
});

const $ = (sel) => document.querySelector(sel);
function debounce(fn, ms) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

/**
 * Debounce whose delay grows with how long `fn` took last time (at least `minMs`, about `factor` × its cost):
 * on a 120,000-line document the outline, statistics and preview must not run after every keystroke.
 */
function adaptive(fn, minMs, factor = 3) {
  let timer = null;
  let cost = 0;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const started = performance.now();
      await fn();
      cost = performance.now() - started;
    }, Math.min(5000, Math.max(minMs, cost * factor)));
  };
}

// ---------------------------------------------------------------------------------------------------- layout

function build() {
  const themeSelect = h('select#theme-select', { i18nTitle: 'theme', onchange: (e) => changeUi({ theme: e.target.value }) },
    THEMES.map((key) => h('option', { value: key, i18n: `theme.${key}` })));
  const typoSelect = h('select#typography-select', { i18nTitle: 'typography', onchange: (e) => changeUi({ typography: e.target.value }) },
    TYPOGRAPHIES.map((key) => h('option', { value: key, i18n: `typo.${key}` })));
  const langSelect = h('select#language-select', { i18nTitle: 'language', onchange: (e) => changeUi({ cultureName: e.target.value }) },
    LANGUAGES.map(([key, name]) => h('option', { value: key }, name)));

  const cmd = (name) => () => app.view && runEditorCommand(app.view, name);
  const toggle = (field) => () => changeUi({ [field]: !app.ui[field] });
  const fmt = (name, label, glyph) => h('button.tool', { type: 'button', i18nTitle: label, dataset: { command: name }, onclick: cmd(name) }, glyph);

  const menus = h('nav.menus', {},
    menu('menu-file', 'menu.file', [
      { id: 'new', label: 'file.new', action: () => newFile(app, openFile) },
      { id: 'save', label: 'save', keys: 'Ctrl+S', action: saveDocument },
      { id: 'save-as', label: 'file.saveAs', keys: 'Ctrl+Shift+S', action: () => saveDocumentAs(app) },
      { id: 'open', label: 'openFile', action: () => openPanel('openFile', app) },
      { id: 'recent', label: 'file.recent', action: () => recentPanel(app, openFile) },
      { id: 'close', label: 'file.close', action: () => closeDocument(app) },
      { id: 'reopen-encoding', label: 'file.reopenEncoding', action: () => reopenWithEncoding(app.doc?.path) },
      { sep: true },
      { id: 'export-html', label: 'export.html', action: () => exportDocument(app, 'html') },
      { id: 'export-pdf', label: 'export.pdf', action: () => exportDocument(app, 'pdf') },
      { id: 'export-png', label: 'export.png', action: () => exportDocument(app, 'png') },
      { id: 'export-docx', label: 'export.docx', action: () => exportDocument(app, 'docx') },
      { sep: true },
      { id: 'copy-wechat', label: 'copy.wechat', action: () => copyRich(app, 'wechat') },
      { id: 'copy-zhihu', label: 'copy.zhihu', action: () => copyRich(app, 'zhihu') },
      { id: 'copy-juejin', label: 'copy.juejin', action: () => copyRich(app, 'juejin') },
      { sep: true },
      { id: 'properties', label: 'panel.properties', action: () => openPanel('properties', app) },
    ]),
    menu('menu-edit', 'menu.edit', [
      { id: 'undo', label: 'cmd.undo', keys: 'Ctrl+Z', action: cmd('undo') },
      { id: 'redo', label: 'cmd.redo', keys: 'Ctrl+Y', action: cmd('redo') },
      { sep: true },
      { id: 'find', label: 'panel.find', keys: 'Ctrl+F', action: () => openPanel('find', app) },
      { id: 'replace', label: 'panel.replace', keys: 'Ctrl+H', action: () => openPanel('replace', app) },
      { id: 'select-all', label: 'cmd.selectAll', keys: 'Ctrl+A', action: cmd('selectAll') },
    ]),
    menu('menu-format', 'menu.format', [
      'paragraph', 'heading1', 'heading2', 'heading3', null, 'bold', 'italic', 'inlineCode', 'link', 'image', null,
      'quote', 'orderedList', 'unorderedList', 'taskList', 'codeFence', 'mathBlock', 'table', 'horizontalRule', null,
      'clearFormatting',
    ].map((name) => (name ? { id: `cmd-${name}`, label: `cmd.${name}`, action: cmd(name) } : { sep: true }))),
    menu('menu-view', 'menu.view', [
      { id: 'toggle-sidebar', label: 'layout.sidebar', check: () => app.ui.isSidebarVisible, action: toggle('isSidebarVisible') },
      { id: 'show-outline', label: 'sidebar.outline', check: () => app.ui.isSidebarVisible && app.ui.selectedSidebarTab === 'outline',
        action: () => changeUi({ selectedSidebarTab: 'outline', isSidebarVisible: true }) },
      { id: 'show-files', label: 'sidebar.files', check: () => app.ui.isSidebarVisible && app.ui.selectedSidebarTab === 'files',
        action: () => changeUi({ selectedSidebarTab: 'files', isSidebarVisible: true }) },
      { sep: true },
      { id: 'toggle-source', label: 'layout.source', check: () => app.ui.isSourceMode, action: toggle('isSourceMode') },
      { id: 'toggle-preview', label: 'layout.preview', check: () => app.ui.isPreviewVisible, action: toggle('isPreviewVisible') },
      { id: 'toggle-lines', label: 'layout.lineNumbers', check: () => app.ui.showLineNumbers, action: toggle('showLineNumbers') },
      { id: 'toggle-status', label: 'layout.statusBar', check: () => app.ui.isStatusBarVisible, action: toggle('isStatusBarVisible') },
      { id: 'toggle-compact', label: 'layout.compact', check: () => app.ui.isCompactLayout, action: toggle('isCompactLayout') },
      { id: 'toggle-remote-images', label: 'layout.remoteImages', check: () => app.ui.allowRemoteImages, action: toggle('allowRemoteImages') },
      { sep: true },
      { id: 'refresh-preview', label: 'refreshPreview', action: () => refreshPreview(true) },
      { id: 'word-count', label: 'panel.wordCount', action: () => openPanel('wordCount', app) },
    ]),
    menu('menu-help', 'menu.help', [
      { id: 'mcp-settings', label: 'panel.mcpSettings', action: () => openPanel('mcpSettings', app) },
      { id: 'audit', label: 'panel.audit', action: () => openPanel('audit', app) },
      { id: 'shortcuts', label: 'panel.shortcuts', keys: 'F1', action: shortcutsPanel },
      { sep: true },
      { id: 'changelog', label: 'panel.changelog', action: () => openPanel('changelog', app) },
      { id: 'thanks', label: 'panel.thanks', action: () => openPanel('thanks', app) },
      { id: 'about', label: 'panel.about', action: () => openPanel('about', app) },
    ]),
  );

  const toolbar = h('div.toolbar', { role: 'toolbar' },
    fmt('bold', 'cmd.bold', 'B'), fmt('italic', 'cmd.italic', 'I'), fmt('inlineCode', 'cmd.inlineCode', '</>'),
    fmt('heading1', 'cmd.heading1', 'H1'), fmt('heading2', 'cmd.heading2', 'H2'),
    fmt('link', 'cmd.link', icon('link')), fmt('quote', 'cmd.quote', '❝'), fmt('unorderedList', 'cmd.unorderedList', '•'),
    fmt('taskList', 'cmd.taskList', '☑'), fmt('table', 'cmd.table', '▦'), fmt('mathBlock', 'cmd.mathBlock', '∑'));

  const exportMenu = menu('menu-export', 'export', [
    { id: 'export-html', label: 'export.html', action: () => exportDocument(app, 'html') },
    { id: 'export-pdf', label: 'export.pdf', action: () => exportDocument(app, 'pdf') },
    { id: 'export-png', label: 'export.png', action: () => exportDocument(app, 'png') },
    { id: 'export-docx', label: 'export.docx', action: () => exportDocument(app, 'docx') },
    { sep: true },
    { id: 'copy-wechat', label: 'copy.wechat', action: () => copyRich(app, 'wechat') },
    { id: 'copy-zhihu', label: 'copy.zhihu', action: () => copyRich(app, 'zhihu') },
    { id: 'copy-juejin', label: 'copy.juejin', action: () => copyRich(app, 'juejin') },
  ]);
  exportMenu.classList.add('export-menu');

  const topbar = h('header.topbar', {},
    h('div.brand', {}, h('span.logo', { 'aria-hidden': 'true' }, '◆'), h('span', {}, 'deskbridge')),
    menus,
    h('div.doc-title', {}, h('span#doc-name', {}, ''), h('span#dirty-dot', { i18nTitle: 'unsaved' }, '●')),
    toolbar,
    h('div.spacer'),
    exportMenu,
    h('label.picker', {}, h('span.picker-icon', { 'aria-hidden': 'true' }, '◐'), themeSelect),
    h('label.picker', {}, h('span.picker-icon', { 'aria-hidden': 'true' }, 'Aa'), typoSelect),
    h('label.picker', {}, h('span.picker-icon', { 'aria-hidden': 'true' }, '文'), langSelect),
    h('button#mcp-button.chip', { type: 'button', onclick: () => openPanel('mcpSettings', app), i18nTitle: 'panel.mcpSettings' },
      h('span#mcp-dot.dot'), h('span', {}, 'MCP')));

  const banners = h('div.banners', {},
    h('div#approvals-off-banner.banner.warn', { hidden: true, role: 'alert' },
      h('span', { i18n: 'approvalsOff' }),
      h('button.link', { type: 'button', i18n: 'panel.mcpSettings', onclick: () => openPanel('mcpSettings', app) })),
    h('div#external-banner.banner.info', { hidden: true, role: 'alert' },
      h('span#external-text', { i18n: 'externalChange' }),
      h('button#external-reload', { type: 'button', i18n: 'reload', onclick: () => resolveExternal('reload') }),
      h('button#external-keep', { type: 'button', i18n: 'keepMine', onclick: () => resolveExternal('keep') })),
    h('div#error-banner.banner.error', { hidden: true, role: 'alert' }, h('span#error-text'),
      h('button#error-close.banner-close', { type: 'button', i18nTitle: 'close', onclick: () => hideError() }, '×')));

  const sidebar = h('aside#sidebar.sidebar', {},
    h('div.tabs', { role: 'tablist' },
      h('button#tab-files.tab', { type: 'button', role: 'tab', i18n: 'sidebar.files', onclick: () => changeUi({ selectedSidebarTab: 'files' }) }),
      h('button#tab-outline.tab', { type: 'button', role: 'tab', i18n: 'sidebar.outline', onclick: () => changeUi({ selectedSidebarTab: 'outline' }) })),
    h('div.files-tools', {}, h('button#file-new.link', { type: 'button', i18n: 'file.new', onclick: () => newFile(app, openFile) })),
    h('div#files-list.side-list', { role: 'list' }),
    h('div#outline-list.side-list', { role: 'list' }));

  const main = h('main.workspace', {},
    sidebar,
    h('section#source-pane.pane.source', {}, h('div#editor')),
    h('section#preview-pane.pane.preview-pane', {},
      h('div#preview-scroll.preview-scroll')));

  const status = h('footer#statusbar.statusbar', {},
    h('span#st-cursor'), h('span#st-lines'), h('span#st-words'), h('span#st-chars'),
    h('span#st-dirty'), h('span#st-sync'), h('span.spacer'), h('span#st-approvals'), h('span#st-mcp'));

  const root = document.getElementById('app');
  root.append(topbar, banners, main, status, h('div#modal-layer'), h('div#toasts.toasts'));
  handleImageInput(app, $('#editor')); // pasted / dropped images are saved beside the document

  document.addEventListener('keydown', (event) => {
    if (event.key === 'F1' && !event.ctrlKey && !event.metaKey && !event.altKey) { event.preventDefault(); shortcutsPanel(); return; }
    if (!(event.ctrlKey || event.metaKey) || event.altKey) return;
    const key = event.key.toLowerCase();
    if (key === 's') { event.preventDefault(); if (event.shiftKey) saveDocumentAs(app); else saveDocument(); }
    if (key === 'h') { event.preventDefault(); app.openSearch(true); }
  });
  // Scroll sync source → preview by the renderer's source-line marks (proportional when there are none);
  // a large document's preview window follows the editor.
  document.addEventListener('scroll', (event) => {
    if (!app.view || event.target !== app.view.scrollDOM) return;
    const line = topLine();
    if (app.previewWindow && (line < app.previewWindow.from || line > app.previewWindow.to - 300)) refreshPreviewSoon();
    if (scrollPreviewToLine(app.preview, line)) return;
    const src = event.target;
    const dst = app.preview?.ownerDocument.scrollingElement;
    if (!dst) return;
    const ratio = src.scrollTop / Math.max(1, src.scrollHeight - src.clientHeight);
    dst.scrollTop = ratio * (dst.scrollHeight - dst.clientHeight);
  }, true);
}

// ---------------------------------------------------------------------------------------------- view state

/** Change view state: apply now, and tell the server (which tells every other tab and answers md_ui_get_state). */
async function changeUi(partial) {
  applyUi({ ...app.ui, ...partial });
  try {
    applyUi(await api.uiSet(partial));
  } catch (err) {
    showError(err);
  }
}

function applyUi(next) {
  const previous = app.ui;
  app.ui = { ...app.ui, ...next };
  const ui = app.ui;
  const html = document.documentElement;
  html.dataset.theme = ui.theme;
  html.dataset.compact = String(!!ui.isCompactLayout);
  html.lang = ui.cultureName;
  if (app.preview) {
    app.preview.dataset.typo = ui.typography;
    Object.assign(app.preview.ownerDocument.documentElement.dataset, { theme: ui.theme, compact: String(!!ui.isCompactLayout) });
  }
  if (previous.allowRemoteImages !== ui.allowRemoteImages && app.preview) mountPreview().then(() => refreshPreview(true));
  $('#theme-select').value = ui.theme;
  $('#typography-select').value = ui.typography;
  $('#language-select').value = ui.cultureName;
  $('#sidebar').hidden = !ui.isSidebarVisible;
  $('#statusbar').hidden = !ui.isStatusBarVisible;
  $('#source-pane').hidden = !ui.isSourceMode;
  $('#preview-pane').hidden = !ui.isPreviewVisible;
  document.querySelector('.workspace').dataset.panes =
    `${ui.isSourceMode ? 'source' : ''}${ui.isPreviewVisible ? 'preview' : ''}` || 'none';
  const filesTab = ui.selectedSidebarTab === 'files';
  $('#tab-files').classList.toggle('active', filesTab);
  $('#tab-outline').classList.toggle('active', !filesTab);
  $('#tab-files').setAttribute('aria-selected', String(filesTab));
  $('#tab-outline').setAttribute('aria-selected', String(!filesTab));
  $('#files-list').hidden = !filesTab;
  $('#outline-list').hidden = filesTab;
  if (previous.cultureName !== ui.cultureName || !document.body.dataset.translated) {
    setLanguage(ui.cultureName);
    retranslate();
    document.body.dataset.translated = '1';
    if (app.view) setPhrases(app.view, ui.cultureName);
    renderStatus();
    renderOutline();
    renderFiles();
    renderMcpStatus();
  }
  if (app.view && previous.showLineNumbers !== ui.showLineNumbers) setLineNumbers(app.view, ui.showLineNumbers);
  if (app.view) app.view.requestMeasure();
}

// ------------------------------------------------------------------------------------------------ document

async function loadDocument(docId, { keepUnsynced = false } = {}) {
  app.loadingDocId = docId;
  // Leaving a document: let its last keystrokes reach the server first, so switching never drops typing — and
  // while some still have not (the server is slow or cannot be reached), stay: switching would throw them away.
  if (app.sync && !app.sync.closed && app.docId !== docId && await app.sync.flush(2000)) {
    app.loadingDocId = null;
    throw new Error(t('notSynced'));
  }
  const doc = await api.doc(docId).finally(() => { app.loadingDocId = null; });
  // Taken now, after the wait: typing during the load is unsynced too (see resync).
  const unsynced = keepUnsynced && app.docId === docId ? app.sync?.unsynced() : null;
  reportedDrafts = false;
  app.sync?.close();
  app.docId = docId;
  app.doc = doc;
  app.serverDirty = !!doc.dirty;
  app.previewVersion = -1;
  const state = createState({
    text: doc.text, version: doc.version, clientID: app.clientId, language: app.ui.cultureName,
    showLineNumbers: app.ui.showLineNumbers, onUpdate,
  });
  if (app.view) app.view.setState(state);
  else app.view = new EditorView({ state, parent: $('#editor') });
  app.sync = new DocSync(app.view, docId, {
    onChange: () => { refreshPreviewSoon(); },
    onSynced: () => { if (app.sync && app.sync.version() !== app.previewVersion) refreshPreviewSoon(); renderDirty(); },
    // A change too large for the server (LIMIT_EXCEEDED, 413) can never be sent: say what the person can do.
    onError: (err) => showError(err.status === 413 ? new Error(t('syncTooLarge')) : err),
    onResync: () => resync(docId),
    onGone: () => documentGone(),
  });
  const url = new URL(location.href);
  url.searchParams.set('doc', docId);
  history.replaceState(null, '', url);
  $('#doc-name').textContent = doc.fileName || doc.name || (doc.path || docId).split(/[\\/]/).pop();
  document.title = `${$('#doc-name').textContent} — deskbridge`;
  rememberRecent(docId); // File → Recent files
  if (doc.externalChange || doc.external) showExternal(Boolean(doc.externalDeleted)); else $('#external-banner').hidden = true;
  renderOutline();
  renderStats();
  refreshPreview(true);
  renderFiles();
  return unsynced;
}

/**
 * The server no longer has the updates since this tab's version (it keeps the last 20,000: collab.py
 * UPDATE_LOG_MAX), so the tab loads the document again — and carries the person's unsynced typing over: it is
 * applied again on the fresh text (rebaseUnsynced) as a local change, which the sync loop then sends. It was
 * dropped with only a toast before.
 */
async function resync(docId) {
  let kept;
  try {
    kept = await loadDocument(docId, { keepUnsynced: true });
  } catch (err) {
    showError(err); // the old text, typing included, stays on screen
    return;
  }
  if (!kept) { toast(t('resynced'), 'warn'); return; }
  const { changes, conflict } = rebaseUnsynced(kept, app.view.state.doc);
  app.view.dispatch({ changes, userEvent: 'input.resync', scrollIntoView: true });
  toast(t(conflict ? 'resyncedKeptConflict' : 'resyncedKept'), 'warn', conflict ? 12000 : 6000);
}

function onUpdate(update) {
  if (update.docChanged) {
    const local = update.transactions.some((tr) => tr.docChanged && !tr.annotation(Transaction.remote));
    if (local) app.sync?.push();
    renderOutlineSoon();
    renderStatsSoon();
  }
  if (update.docChanged || update.selectionSet) {
    reportSelectionSoon();
    renderCursor();
  }
  renderDirty();
}

/** The open document was closed elsewhere (an AI's close, another tab): show what the server has open now. */
async function documentGone() {
  app.sync?.close();
  toast(t('docClosed'), 'warn');
  try {
    const { docs, current } = await api.docs();
    const next = docs.find((d) => d.docId === current) || docs[0];
    if (next) { await loadDocument(next.docId); return; }
  } catch (err) {
    showError(err);
  }
  app.docId = null;
  // Nothing is open any more: the title, the status bar (it kept "Unsaved changes" and the closed document's
  // counts), the outline and the file list's highlight must say so too.
  app.doc = null;
  app.sync = null;
  app.serverDirty = false;
  app.view?.setState(createState({ text: '', version: 0, clientID: app.clientId, language: app.ui.cultureName,
    showLineNumbers: app.ui.showLineNumbers, onUpdate: () => {} }));
  app.preview?.replaceChildren(h('p.empty', { i18n: 'noDocument' }));
  $('#doc-name').textContent = '';
  $('#external-banner').hidden = true;
  document.title = 'deskbridge';
  renderOutline();
  renderStats();
  renderFiles();
}

async function saveDocument() {
  if (!app.docId) return;
  try {
    if (app.sync && await app.sync.flush(2000)) throw new Error(t('notSynced'));
    const result = await api.save(app.docId);
    app.serverDirty = !!(result && result.dirty);
    renderDirty();
    toast(t('saved'), 'ok');
  } catch (err) {
    showError(err);
  }
}

async function resolveExternal(action) {
  // Reloading replaces the editor's text with the file's, and a reload is no undo step: with unsaved changes
  // (or typing still on its way) one click on the wrong button threw the person's work away.
  const unsaved = app.serverDirty || (app.sync && app.sync.pending() > 0);
  if (action === 'reload' && unsaved && !confirm(t('confirmReload', { name: app.doc?.fileName || '' }))) return;
  try {
    await api.external(app.docId, action);
    $('#external-banner').hidden = true;
    if (action === 'reload') await loadDocument(app.docId);
  } catch (err) {
    showError(err);
  }
}

// ------------------------------------------------------------------------------------------------- preview

/** Above this many characters the server previews a window of lines (web.py PREVIEW_FULL_MAX_CHARS). */
const PREVIEW_FULL_MAX_CHARS = 200_000;
const PREVIEW_WINDOW_BEFORE = 200;
const PREVIEW_WINDOW_LINES = 1200;

/** First line (1-based) visible at the top of the source editor. */
function topLine() {
  const view = app.view;
  const block = view.lineBlockAtHeight(view.scrollDOM.scrollTop - view.documentPadding.top);
  return view.state.doc.lineAt(Math.min(block.from, view.state.doc.length)).number;
}

let previewBusy = false;
let previewAgain = false;
async function refreshPreview(force = false) {
  if (!app.docId || (!force && !app.ui.isPreviewVisible)) return;
  if (previewBusy) { previewAgain = true; return; }
  previewBusy = true;
  try {
    let range = null;
    if (app.view && app.view.state.doc.length > PREVIEW_FULL_MAX_CHARS) {
      const from = Math.max(1, topLine() - PREVIEW_WINDOW_BEFORE);
      range = { from, to: from + PREVIEW_WINDOW_LINES };
    }
    const { html, version, window: win } = await api.preview(app.docId, range);
    app.previewVersion = version;
    app.previewWindow = win || null;
    if (!app.preview) await mountPreview();
    await showPreview(app.preview, html, win ? win.from - 1 : 0, api.assetBase(app.docId), remoteImages());
    app.preview.dataset.version = String(version);
    if (win && app.view) scrollPreviewToLine(app.preview, topLine());
  } catch (err) {
    if (err.status !== 404) showError(err);
  } finally {
    previewBusy = false;
    if (previewAgain) { previewAgain = false; refreshPreview(); }
  }
}
const refreshPreviewSoon = adaptive(() => refreshPreview(), 120, 1.5);

function remoteImages() {
  return { all: !!app.ui.allowRemoteImages, loaded: app.remoteLoaded, label: t('remoteImageBlocked') };
}

/** (Re)create the sandboxed preview frame and wire its events (preview → source). */
async function mountPreview() {
  const ui = app.ui;
  app.preview = await mountPreviewFrame($('#preview-scroll'), {
    remote: remoteImages(),
    attrs: { 'data-theme': ui.theme, 'data-compact': String(!!ui.isCompactLayout), lang: ui.cultureName },
    onReady: (article) => {
      article.dataset.typo = ui.typography;
      // double-click a block to put the cursor on its first line; tick a task box to edit it
      article.addEventListener('dblclick', (event) => {
        const block = event.target.closest('[data-source-line]');
        if (block && app.view) goToLine(Number(block.dataset.sourceLine));
      });
      article.addEventListener('change', (event) => {
        if (event.target.matches('input[type=checkbox]')) toggleTask(event.target);
      });
      article.addEventListener('click', (event) => {
        const held = event.target.closest('.remote-image-blocked');
        if (held) { // the person asked for this one remote image: allow exactly its URL in the frame's policy
          app.remoteLoaded.add(held.dataset.remoteSrc);
          mountPreview().then(() => refreshPreview(true));
          return;
        }
        const link = event.target.closest('a[href]');
        if (!link) return;
        event.preventDefault(); // the frame never navigates; web links open in a new tab without an opener
        const href = link.getAttribute('href');
        if (href.startsWith('#')) {
          link.ownerDocument.getElementById(decodeURIComponent(href.slice(1)))?.scrollIntoView();
        } else if (/^https?:\/\//i.test(href)) {
          window.open(href, '_blank', 'noopener,noreferrer');
        }
      });
    },
  });
  return app.preview;
}

// ------------------------------------------------------------------------------------------- sidebar lists

/** Height of one outline row (px, app.css .outline-virtual > .outline-item); the list draws only what shows. */
const OUTLINE_ROW = 26;
const OUTLINE_OVERSCAN = 20;

/**
 * The outline, virtualised: a 120,000-line document can have tens of thousands of headings, and every one of
 * them is reachable by scrolling (issue 10: the list used to stop at 3,000 with a "… and N more" that did nothing).
 */
function renderOutline() {
  const list = $('#outline-list');
  if (!list) return;
  if (!app.view) { list.replaceChildren(); return; }
  app.outline = outlineOf(app.view.state.doc);
  if (!app.outline.length) { list.replaceChildren(h('p.empty', { i18n: 'noHeadings' })); return; }
  let inner = list.querySelector('.outline-virtual');
  if (!inner) {
    inner = h('div.outline-virtual', { role: 'list' });
    list.replaceChildren(inner);
    list.addEventListener('scroll', () => drawOutlineRows(), { passive: true });
  }
  inner.style.height = `${app.outline.length * OUTLINE_ROW}px`;
  drawOutlineRows(true);
}

function drawOutlineRows(force = false) {
  const list = $('#outline-list');
  const inner = list?.querySelector('.outline-virtual');
  if (!inner) return;
  const first = Math.max(0, Math.floor(list.scrollTop / OUTLINE_ROW) - OUTLINE_OVERSCAN);
  const last = Math.min(app.outline.length, Math.ceil((list.scrollTop + list.clientHeight) / OUTLINE_ROW) + OUTLINE_OVERSCAN);
  if (!force && inner.dataset.first === String(first) && inner.dataset.last === String(last)) return;
  inner.dataset.first = String(first);
  inner.dataset.last = String(last);
  const rows = [];
  for (let index = first; index < last; index += 1) {
    const item = app.outline[index];
    rows.push(h(`button.outline-item.level-${item.level}`, {
      type: 'button', role: 'listitem', title: item.title, dataset: { index: String(index) },
      style: `top:${index * OUTLINE_ROW}px`,
      onclick: () => goToHeading(item, index),
    }, item.title || '—'));
  }
  inner.replaceChildren(...rows);
}
const renderOutlineSoon = adaptive(renderOutline, 250);

function goToLine(number) {
  const view = app.view;
  const line = view.state.doc.line(Math.max(1, Math.min(number, view.state.doc.lines)));
  view.dispatch({ selection: { anchor: line.from }, effects: EditorView.scrollIntoView(line.from, { y: 'center' }) });
  view.focus();
}

const TASK = /^(\s*(?:[-*+]|\d+[.)])\s+\[)([ xX])(\])/;

/**
 * The person ticked a task box in the preview: flip `[ ]`/`[x]` on the matching source line, as their own edit.
 * The n-th box of the shown preview is the n-th task line (outside code fences) from where the preview starts.
 */
function toggleTask(box) {
  const view = app.view;
  if (!view) return;
  const boxes = [...app.preview.querySelectorAll('input[type=checkbox]')];
  const index = boxes.indexOf(box);
  const doc = view.state.doc;
  const first = app.previewWindow ? app.previewWindow.from : 1;
  const last = app.previewWindow ? app.previewWindow.to : doc.lines;
  const tasks = [];
  let fence = null;
  for (let n = first; n <= last; n += 1) {
    const text = doc.line(n).text;
    const f = /^\s{0,3}(`{3,}|~{3,})/.exec(text);
    if (fence) { if (f && f[1][0] === fence[0] && f[1].length >= fence.length) fence = null; continue; }
    if (f) { fence = f[1]; continue; }
    if (TASK.test(text)) tasks.push(n);
  }
  if (index < 0 || tasks.length !== boxes.length) { refreshPreview(true); return; } // unsure: show the truth
  const line = doc.line(tasks[index]);
  const m = TASK.exec(line.text);
  const at = line.from + m[1].length;
  view.dispatch({ changes: { from: at, to: at + 1, insert: box.checked ? 'x' : ' ' }, userEvent: 'input.toggle' });
}

function goToHeading(item, index) {
  const view = app.view;
  const line = view.state.doc.line(Math.min(item.line, view.state.doc.lines));
  view.dispatch({ selection: { anchor: line.from }, effects: EditorView.scrollIntoView(line.from, { y: 'start', yMargin: 20 }) });
  view.focus();
  const heading = app.preview?.querySelectorAll('h1, h2, h3, h4, h5, h6')[index];
  heading?.scrollIntoView({ block: 'start', behavior: 'smooth' });
}

let files = [];
async function loadFiles() {
  try {
    files = (await api.files()).files || [];
  } catch {
    files = [];
  }
  renderFiles();
}

// Folders of the file list that the person folded (by folder path), kept while the page is open.
const foldedFolders = new Set();

function renderFiles() {
  const list = $('#files-list');
  if (!list) return;
  list.replaceChildren();
  if (!files.length) { list.append(h('p.empty', { i18n: 'noFiles' })); return; }
  const current = app.doc && app.doc.path;
  // A tree: each folder is a row that folds its files (the server lists them sorted, folders walked in order).
  let folder = null;
  for (const file of files) {
    const path = file.path || file.name;
    const dir = path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '';
    if (dir !== folder) {
      folder = dir;
      if (dir) {
        const depth = dir.split('/').length - 1;
        const folded = foldedFolders.has(dir);
        list.append(h(`button.folder-row${folded ? '.folded' : ''}`, {
          type: 'button', dataset: { folder: dir }, style: `padding-left:${8 + depth * 12}px`,
          'aria-expanded': String(!folded),
          onclick: () => { if (foldedFolders.has(dir)) foldedFolders.delete(dir); else foldedFolders.add(dir); renderFiles(); },
        }, h('span.folder-caret', {}, folded ? '▸' : '▾'), h('span.folder-name', {}, dir.split('/').pop())));
      }
    }
    if ([...foldedFolders].some((f) => dir === f || dir.startsWith(`${f}/`))) continue;
    const depth = dir ? dir.split('/').length : 0;
    const active = current && (current === path || current.endsWith(`/${path}`) || current.endsWith(`\\${path}`));
    list.append(h('div.file-row', { role: 'listitem', dataset: { path } },
      h(`button.file-item${active ? '.active' : ''}`, {
        type: 'button', title: path, onclick: () => openFile(path), style: depth ? `padding-left:${8 + depth * 12}px` : '',
      }, icon('file'), h('span.file-name', {}, file.name || path.split(/[\\/]/).pop())),
      // rename / delete (to the trash) through the kind's file tools (files.js)
      h('button.file-op.file-rename', { type: 'button', i18nTitle: 'file.rename', onclick: () => renameFile(app, path, loadFiles) }, '✎'),
      h('button.file-op.file-delete', { type: 'button', i18nTitle: 'file.delete', onclick: () => deleteFile(app, path, loadFiles) }, '×')));
  }
}

// The encoding most files that are not UTF-8 have for a person reading this UI language (a first guess only).
const LEGACY_ENCODING = { 'zh-CN': 'gb18030', 'zh-Hant': 'big5', 'ja-JP': 'shift_jis' };

export async function openFile(path, encoding) {
  try {
    // Refused before the server is asked, so the document it calls current stays the one on screen.
    if (app.sync && !app.sync.closed && await app.sync.flush(2000)) throw new Error(t('notSynced'));
    const opened = await api.open(path, encoding);
    await loadDocument(opened.docId);
  } catch (err) {
    // Not valid in the encoding tried (nothing was read or changed): ask the person which one the file has,
    // instead of only saying "reopen it with another encoding" with no way to do so here.
    if (err.code === 'ENCODING_MISMATCH') { await reopenWithEncoding(path, err); return; }
    showError(err);
  }
}
app.openFile = openFile;

/** File → Reopen with encoding… (and after an ENCODING_MISMATCH): read `path` again in the encoding the person
 * names; the server refuses it while the open document has unsaved changes. */
async function reopenWithEncoding(path, err) {
  if (!path) return;
  const supported = err?.body?.error?.data?.supported
    || ['utf-8', 'utf-16', 'gb18030', 'big5', 'shift_jis', 'latin-1'];
  const question = err ? t('file.notUtf8', { name: path, list: supported.join(', ') })
    : t('file.pickEncoding', { name: path, list: supported.join(', ') });
  const choice = prompt(question, LEGACY_ENCODING[app.ui.cultureName] || (err ? 'latin-1' : app.doc?.encoding || 'utf-8'));
  if (choice && choice.trim()) await openFile(path, choice.trim());
}

// -------------------------------------------------------------------------------------------- status bar

let stats = { lines: 0, words: 0, chars: 0 };
function renderStats() {
  if (app.view) stats = countText(app.view.state.doc);
  renderStatus();
}
const renderStatsSoon = adaptive(renderStats, 200);

function renderCursor() {
  const el = $('#st-cursor');
  if (!app.view || !el) return;
  const head = app.view.state.selection.main.head;
  const line = app.view.state.doc.lineAt(head);
  el.textContent = t('status.cursor', { line: line.number, col: head - line.from + 1 });
}

function renderDirty() {
  const pending = app.sync ? app.sync.pending() : 0;
  const dirty = app.serverDirty || pending > 0;
  const dot = $('#dirty-dot');
  dot.classList.toggle('on', dirty);
  $('#st-dirty').textContent = dirty ? t('unsaved') : t('saved');
  const name = $('#doc-name').textContent;
  if (name) document.title = `${dirty ? '● ' : ''}${name} — deskbridge`;
  $('#st-dirty').className = dirty ? 'dirty' : 'clean';
  $('#st-sync').textContent = pending ? t('status.pending', { n: pending }) : t('status.synced');
  reportDrafts(pending);
}

function renderStatus() {
  if (!$('#st-lines')) return;
  if (app.view && !stats.lines) stats = countText(app.view.state.doc);
  $('#st-lines').textContent = t('status.lines', { n: stats.lines });
  $('#st-words').textContent = t('status.words', { n: stats.words });
  $('#st-chars').textContent = t('status.chars', { n: stats.chars });
  renderCursor();
  renderDirty();
}
app.stats = () => (app.view ? countText(app.view.state.doc) : stats);

function renderMcpStatus() {
  const status = app.status || {};
  const settings = app.settings || {};
  const requireApproval = settings.require_approval ?? status.requireApproval ?? true;
  const state = mcpState(status, settings);
  const text = t(`mcp.${state}`);
  const mcp = $('#st-mcp');
  if (!mcp) return;
  mcp.textContent = `MCP: ${text}`;
  mcp.dataset.state = state;
  $('#mcp-dot').dataset.state = state;
  $('#mcp-button').title = `${t('panel.mcpSettings')} — ${text}`;
  $('#st-approvals').textContent = requireApproval ? t('approvalsOnShort') : t('approvalsOffShort');
  $('#st-approvals').className = requireApproval ? '' : 'warn';
  $('#approvals-off-banner').hidden = !!requireApproval;
}

async function refreshPlatform() {
  try { app.status = await api.status(); } catch { /* platform route missing: keep last */ }
  try { app.settings = await api.settings(); } catch { /* idem */ }
  renderMcpStatus();
}
app.refreshPlatform = refreshPlatform;

// ------------------------------------------------------------------------------------------------ selection

const reportSelectionSoon = debounce(async () => {
  if (!app.view || !app.sync || !app.docId) return;
  if (app.sync.pending()) { reportSelectionSoon(); return; } // offsets must match the server's text
  const { anchor, head } = app.view.state.selection.main;
  try {
    await api.selection(app.docId, { anchor, head, version: app.sync.version(), clientId: app.clientId });
  } catch { /* the selection is advisory; the next move reports again */ }
}, 250);

// --------------------------------------------------------------------------------------------------- events

function connectEvents() {
  let source;
  let retry = 1000;
  const on = (topic, fn) => source.addEventListener(topic, (event) => {
    let data = {};
    try { data = JSON.parse(event.data || '{}'); } catch { return; }
    fn(data);
  });
  let opened = false;
  const open = () => {
    source = new EventSource(api.eventsUrlFor(app.clientId), { withCredentials: true });
    source.onopen = () => {
      retry = 1000;
      hideError();
      if (opened) resyncAfterGap(); // events may have been missed while the stream was down
      opened = true;
    };
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) { setTimeout(open, retry); retry = Math.min(retry * 2, 15000); }
    };
    on('ui', onUiEvent);
    on('approval', onApprovalEvent);
    on('doc', onDocEvent);
    on('audit', () => refreshAudit(app));
    on('status', () => refreshPlatform());
    on('settings', (data) => { app.settings = data; renderMcpStatus(); });
    on('lagged', resyncAfterGap); // core/events.py: this tab fell behind and events were dropped
    source.addEventListener('message', (event) => { // a bus that sends {topic, data} without an event name
      try {
        const { topic, data } = JSON.parse(event.data);
        ({ ui: onUiEvent, approval: onApprovalEvent, doc: onDocEvent })[topic]?.(data || {});
      } catch { /* not ours */ }
    });
  };
  open();
}

/** Events are never the only source of truth: after a gap, read the view state, approvals and status again. */
async function resyncAfterGap() {
  try { applyUi(await api.uiGet()); } catch { /* keep the current view */ }
  try {
    for (const request of (await api.approvals()).pending || []) showApproval(app, request);
  } catch { /* platform route missing */ }
  refreshPlatform();
  loadFiles();
}

function onUiEvent(data) {
  if (data.event === 'prepare' && data.operationId) { answerPrepare(data); return; } // core draft barrier
  if (data.type === 'clipboard' && data.html) deliverClipboard(app, data); // export.py copy_rich_html
  else if (data.kind === 'state' && data.state) applyUi(data.state);
  else if (data.kind === 'panel') openPanel(data.panel, app);
  else if (data.kind === 'refresh') refreshPreview(true);
  else if (data.kind === 'command' && data.requestId) prepareAgentCommand(data);
  else if (data.kind === 'command' && app.view) runEditorCommand(app.view, data.command);
}

/**
 * An AI asked for an editor command that changes text (editor_commands.py): compute its change at the person's
 * cursor on the synced text, without applying it, and send it to the server, which applies it as an AI edit
 * after the person approves its diff. undo/redo take the last AI change only (collab.js aiSteps).
 */
async function prepareAgentCommand({ requestId, command, docId }) {
  if (!app.view || !app.sync || docId !== app.docId) return; // another tab (or none) shows that document
  const answer = (body) => api.commandResult(requestId, { docId, ...body }).catch(() => {});
  if (app.sync.pending()) await app.sync.flush(1500);
  if (app.sync.pending()) { answer({ error: 'pending' }); return; }
  let changes = null;
  if (command === 'undo' || command === 'redo') {
    changes = aiStep(app.view.state, command);
    if (changes) expectEcho(changes, command);
  } else {
    const tr = prepareCommand(app.view.state, command);
    changes = tr && !tr.changes.empty ? tr.changes : null;
  }
  answer({ version: app.sync.version(), changes: changes ? changes.toJSON() : null });
}

function onApprovalEvent(data) {
  // core/policy.py: {event: 'requested', request: {id, client, tool, target, summary, diff}} then
  // {event: 'resolved', id, decision}; a flat request object is accepted too.
  if (data.event === 'resolved' || typeof data.approved === 'boolean' || data.decision) {
    closeApproval(data.id);
  } else if (data.request?.id || data.id) {
    showApproval(app, data.request || data);
  }
}

// service.py publishes topic 'doc' with `type`: opened, current, update, saved, closed, external-change,
// reloaded, kept.
/** The banner for a change another program made: a file gone from disk has nothing to reload, only to keep. */
function showExternal(deleted) {
  const text = $('#external-text');
  text.dataset.i18n = deleted ? 'externalDeleted' : 'externalChange';
  text.textContent = t(text.dataset.i18n);
  $('#external-reload').hidden = deleted;
  $('#external-banner').hidden = false;
}

function onDocEvent(data) {
  const type = data.type || data.kind;
  if (type === 'opened' || type === 'closed') loadFiles();
  if (type === 'current' && data.docId && data.docId !== app.docId && data.docId !== app.loadingDocId) {
    loadDocument(data.docId).catch(showError); // an AI opened another document: show it, as Vex does
    return;
  }
  if (!data.docId || data.docId !== app.docId) return;
  if (type === 'closed') { documentGone(); return; }
  if (type === 'saved' || type === 'reloaded' || type === 'kept') followDocument(data);
  if (typeof data.dirty === 'boolean') { app.serverDirty = data.dirty; renderDirty(); }
  if (type === 'external-change') showExternal(Boolean(data.deleted));
  if (type === 'reloaded' || type === 'kept') $('#external-banner').hidden = true;
  if (type === 'exported' && data.path) toast(t('exportedTo', { path: data.path }), 'ok', 5000);
}

/** The open document's file may have changed name (an AI's save-as): title, file list and properties follow
 * at once, so the person's next Ctrl+S is known to write the new file (issue 10 data loss 3). */
function followDocument(data) {
  if (!app.doc) return;
  const renamed = data.path && data.path !== app.doc.path;
  for (const key of ['path', 'absolutePath', 'fileName', 'encoding', 'revision']) if (data[key] != null) app.doc[key] = data[key];
  if (data.fileName) $('#doc-name').textContent = data.fileName;
  renderDirty();
  if (renamed) { toast(t('savedAs', { path: data.path }), 'info', 4000); loadFiles(); }
}

/**
 * The draft barrier (core/lifecycle.py, the same for every kind): before a save or close the server asks every
 * open editor; get this tab's typing in the document concerned accepted first, then answer. No answer in time
 * refuses the save (UI_NOT_READY), an answer with drafts refuses it too (UI_DRAFT_PENDING): never a guess.
 */
async function answerPrepare({ operationId, docId }) {
  let pending = 0;
  if (app.sync && (!docId || docId === app.docId)) pending = await app.sync.flush(1500);
  api.editorAck(operationId, app.clientId, pending > 0, { docId: app.docId, pending }).catch(() => {});
}

let reportedDrafts = false;
function reportDrafts(pending) {
  const hasDrafts = pending > 0;
  if (!app.docId || hasDrafts === reportedDrafts) return;
  reportedDrafts = hasDrafts;
  api.editorReport(app.clientId, hasDrafts).catch(() => { reportedDrafts = !hasDrafts; });
}

// -------------------------------------------------------------------------------------------------- errors

/**
 * The error banner. It goes when the person closes it (×), after 8 s, or — for an error of a request — as soon
 * as that request succeeds again (any request, when the server could not be reached at all): it stayed up for
 * 8 s after the problem was gone before.
 */
let shownError = null;
function showError(err) {
  const message = err && err.message ? err.message : String(err);
  $('#error-text').textContent = message;
  $('#error-banner').hidden = false;
  shownError = { route: err?.route ?? null, unreachable: Boolean(err?.unreachable) };
  clearTimeout(showError.timer);
  showError.timer = setTimeout(hideError, 8000);
}
function hideError() {
  shownError = null;
  clearTimeout(showError.timer);
  const el = $('#error-banner');
  if (el) el.hidden = true;
}
onRequestOk((route) => {
  if (shownError && (shownError.unreachable || (shownError.route && shownError.route === route))) hideError();
});
app.showError = showError;

// ------------------------------------------------------------------------------------------------- panels

app.openSearch = (replace) => {
  if (!app.view) return;
  if (!app.ui.isSourceMode) changeUi({ isSourceMode: true });
  openSearchPanel(app.view);
  const field = app.view.dom.querySelector(replace ? '.cm-search input[name=replace]' : '.cm-search input[name=search]');
  field?.focus();
};
app.closeSearch = () => app.view && closeSearchPanel(app.view);
app.changeUi = changeUi;
app.refreshPreview = refreshPreview;

// --------------------------------------------------------------------------------------------------- start

/** The first of the browser's languages we translate to (zh-TW/zh-HK → zh-Hant, other zh → zh-CN). */
function preferredLanguage(languages) {
  for (const raw of languages) {
    const tag = String(raw || '').toLowerCase();
    if (/^zh-(tw|hk|mo|hant)/.test(tag)) return 'zh-Hant';
    if (tag.startsWith('zh')) return 'zh-CN';
    if (tag.startsWith('ja')) return 'ja-JP';
    if (tag.startsWith('en')) return 'en-US';
  }
  return null;
}

async function start() {
  build();
  await mountPreview();
  applyUi(app.ui);
  try {
    applyUi(await api.uiGet());
    // First run (nobody chose a language yet): follow the browser's language when we have it.
    const preferred = preferredLanguage(navigator.languages || [navigator.language]);
    if (app.ui.revision === 0 && preferred && preferred !== app.ui.cultureName) changeUi({ cultureName: preferred });
  } catch (err) {
    showError(err);
  }
  connectEvents();
  refreshPlatform();
  loadFiles();
  offerConnect(); // first run: connect an AI client (the platform's offer, shown as a banner)
  try {
    const pending = await api.approvals();
    for (const request of pending.pending || []) showApproval(app, request);
  } catch { /* no approvals route yet */ }
  try {
    const { docs } = await api.docs();
    const wanted = new URL(location.href).searchParams.get('doc');
    const chosen = docs.find((d) => d.docId === wanted) || docs[0];
    if (chosen) await loadDocument(chosen.docId);
    else {
      app.preview?.replaceChildren(h('p.empty', { i18n: 'noDocument' }));
      applyUi({ selectedSidebarTab: 'files', isSidebarVisible: true }); // only here: let the person pick a file
    }
  } catch (err) {
    showError(err);
  }
  document.body.dataset.ready = '1';
}

start();
