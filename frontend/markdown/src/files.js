// The editor's file operations: New / Close, rename and delete in the file list (delete asks, then moves the file
// to the system's trash), and images pasted or dropped into the source saved beside the document with a relative
// link inserted. Each is a declared tool of the kind (kinds/markdown/file_tools.py) called through the platform's
// App.invoke (`api.tool`), so it is validated and audited like an AI's call.

import { api } from './api.js';
import { t } from './i18n.js';
import { h, modal } from './dom.js';

const IMAGE_TYPES = /^image\/(png|jpeg|gif|webp)$/;

function base64Of(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(',', 2)[1] || '');
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

/** Save each image beside the document and insert its Markdown link at `pos`. */
async function insertImages(app, images, pos) {
  const links = [];
  for (const file of images) {
    try {
      const saved = await api.tool('md_save_image', { dataBase64: await base64Of(file), fileName: file.name || null, docId: app.docId });
      links.push(saved.markdown);
    } catch (err) { app.showError(err); }
  }
  if (!links.length || !app.view) return;
  const at = Math.min(pos, app.view.state.doc.length);
  const insert = links.join('\n');
  app.view.dispatch({ changes: { from: at, insert }, selection: { anchor: at + insert.length }, userEvent: 'input.paste' });
  app.view.focus();
}

const imagesOf = (list) => [...(list || [])].filter((file) => IMAGE_TYPES.test(file.type));

/** Paste and drop of image files into the source pane (`host` contains the CodeMirror view). */
export function handleImageInput(app, host) {
  host.addEventListener('paste', (event) => {
    const images = imagesOf(event.clipboardData?.files);
    if (!images.length || !app.view || !app.docId) return;
    event.preventDefault();
    event.stopPropagation();
    insertImages(app, images, app.view.state.selection.main.head);
  }, true);
  host.addEventListener('dragover', (event) => {
    if ([...(event.dataTransfer?.items || [])].some((item) => IMAGE_TYPES.test(item.type))) event.preventDefault();
  }, true);
  host.addEventListener('drop', (event) => {
    const images = imagesOf(event.dataTransfer?.files);
    if (!images.length || !app.view || !app.docId) return;
    event.preventDefault();
    event.stopPropagation();
    const pos = app.view.posAtCoords({ x: event.clientX, y: event.clientY }) ?? app.view.state.selection.main.head;
    insertImages(app, images, pos);
  }, true);
}

export async function newFile(app, openFile) {
  const name = prompt(t('file.newName'), 'untitled.md');
  if (!name) return;
  try {
    const created = await api.tool('md_create_file', { path: /\.(md|markdown|mdown|txt)$/i.test(name) ? name : `${name}.md` });
    await openFile(created.path);
  } catch (err) { app.showError(err); }
}

/** File → Save as…: the open document's text into another file of the folder, which it then is (a file that
 * exists is replaced only after the person confirms). */
export async function saveDocumentAs(app) {
  if (!app.docId) return;
  const current = (app.doc && (app.doc.path || app.doc.fileName || app.doc.name)) || 'untitled.md';
  const name = prompt(t('file.saveAsTo'), current);
  if (!name || name === current) return;
  const path = /\.(md|markdown|mdown|txt)$/i.test(name) ? name : `${name}.md`;
  const saveAs = async (overwrite) => {
    if (app.sync && await app.sync.flush(2000)) throw new Error(t('notSynced'));
    await api.tool('md_save_current_document_as', { docId: app.docId, path, overwrite });
  };
  try {
    await saveAs(false);
  } catch (err) {
    if (err.code === 'TARGET_EXISTS' && confirm(t('file.confirmReplace', { name: path }))) {
      try { await saveAs(true); } catch (again) { app.showError(again); }
    } else app.showError(err);
  }
}

export async function renameFile(app, path, reload) {
  const next = prompt(t('file.renameTo'), path);
  if (!next || next === path) return;
  try {
    await api.tool('md_rename_file', { path, newPath: next });
    await reload();
  } catch (err) { app.showError(err); }
}

export async function deleteFile(app, path, reload) {
  if (!confirm(t('file.confirmDelete', { name: path }))) return;
  try {
    await api.tool('md_delete_file', { path });
    await reload();
  } catch (err) { app.showError(err); }
}

export async function closeDocument(app) {
  if (!app.docId) return;
  try {
    await app.sync?.flush(2000);
    await api.tool('md_close_document', { docId: app.docId });
  } catch (err) {
    if (err.code === 'UNSAVED_CHANGES' && confirm(t('file.confirmDiscard'))) {
      try { await api.tool('md_close_document', { docId: app.docId, discard: true }); } catch (again) { app.showError(again); }
    } else app.showError(err);
  }
}

/** File → Recent files: the documents opened lately (kept by the server between runs), click to open. */
export async function recentPanel(app, openFile) {
  let files = [];
  try { ({ files } = await api.tool('md_recent_files', {})); } catch (err) { app.showError(err); return; }
  const dialog = modal('panel-recent', 'file.recent', files.length
    ? h('div#recent-list.side-list', {}, files.map((file) => h('button.file-item', {
      type: 'button', title: file.path, onclick: () => { dialog.close(); openFile(file.path); },
    }, h('span.file-name', {}, file.name), h('span.file-dir', {}, file.path))))
    : h('p.empty', { i18n: 'file.noRecent' }));
}

/** Record the shown document in the recent files (the server takes the path from its own open document). */
export function rememberRecent(docId) {
  api.tool('md_remember_recent', { docId }).catch(() => { /* advisory */ });
}
