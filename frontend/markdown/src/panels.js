// The editor's dialogs: MCP settings, audit log, the approval dialog with its diff, export/copy, and the small
// informational panels (properties, word count, about, changelog, thanks).

// The platform's rule for when an answer counts, bundled from its one source (also served as /platform-static).
import { answerable } from '../../../src/deskbridge/web/static/approval-guard.js';
import { api } from './api.js';
import { h, modal, toast } from './dom.js';
import { t } from './i18n.js';
import { mcpState } from './status.js';

const $ = (sel) => document.querySelector(sel);

export function openPanel(name, app) {
  switch (name) {
    case 'find': return app.openSearch(false);
    case 'replace': return app.openSearch(true);
    case 'mcpSettings': return mcpSettings(app);
    case 'audit': return auditPanel(app);
    case 'properties': return properties(app);
    case 'wordCount': return wordCount(app);
    case 'openFile': return openFileDialog(app);
    case 'changelog': return infoPanel('changelog', 'changelogText');
    case 'thanks': return infoPanel('thanks', 'thanksText');
    case 'about': return infoPanel('about', 'aboutText');
    default: return undefined;
  }
}

function infoPanel(id, textKey) {
  modal(`panel-${id}`, `panel.${id}`, h('div.prose', {}, t(textKey).split('\n').map((line) => h('p', {}, line))),
    { actions: [h('button', { type: 'button', i18n: 'close', onclick: () => $(`#panel-${id}`)?.remove() })] });
}

function table(rows) {
  return h('table.kv', {}, h('tbody', {}, rows.map(([key, value]) => h('tr', {}, h('th', { i18n: key }), h('td', {}, value)))));
}

function properties(app) {
  const doc = app.doc || {};
  modal('panel-properties', 'panel.properties', table([
    ['prop.path', doc.path || '—'],
    ['prop.docId', app.docId || '—'],
    ['prop.version', String(app.sync ? app.sync.version() : doc.version ?? '—')],
    ['prop.revision', String(doc.revision ?? '—')],
    ['prop.encoding', doc.encoding || 'utf-8'],
  ]));
}

function wordCount(app) {
  const s = app.stats();
  const sel = app.view ? app.view.state.selection.main : null;
  const selected = sel ? sel.to - sel.from : 0;
  modal('panel-wordCount', 'panel.wordCount', table([
    ['prop.lines', String(s.lines)], ['prop.words', String(s.words)], ['prop.chars', String(s.chars)],
    ['prop.selected', String(selected)],
  ]));
}

function openFileDialog(app) {
  const input = h('input#open-path', { type: 'text', autofocus: true, dataset: { i18nPlaceholder: 'openPathHint' }, placeholder: t('openPathHint') });
  const go = () => { const path = input.value.trim(); if (path) { dlg.close(); app.openFile(path); } };
  input.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
  const dlg = modal('panel-open', 'openFile', h('label.field', {}, h('span', { i18n: 'prop.path' }), input),
    { actions: [h('button.primary', { type: 'button', i18n: 'open', onclick: go })] });
}

// ---------------------------------------------------------------------------------------------- MCP settings

const SCOPES = ['current_document', 'current_folder', 'custom_folder'];
const RULES = ['edit', 'overwrite', 'open_outside', 'copy_rich_html', 'export', 'save', 'save_as'];

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    const area = h('textarea', { style: 'position:fixed;opacity:0' }, text);
    document.body.append(area);
    area.select();
    document.execCommand('copy');
    area.remove();
  }
  toast(t('copied'), 'ok', 1800);
}

async function mcpSettings(app) {
  let settings;
  let ruleDefaults = {};
  try {
    [settings, { defaults: ruleDefaults }] = await Promise.all([
      api.settings(), api.approvalRules().catch(() => ({ defaults: {} }))]);
  } catch (err) {
    app.showError(err);
    return;
  }
  await app.refreshPlatform();
  const port = h('input#mcp-port', { type: 'number', min: 1, max: 65535, value: String(settings.port ?? 17891) });
  const enabled = h('input#mcp-enabled', { type: 'checkbox', checked: settings.mcp_enabled !== false });
  // Empty until the person asks to see it and confirms (the server shows the token to no silent request).
  const tokenInput = h('input#mcp-token.mono', {
    type: 'password', readOnly: true, value: '', dataset: { i18nPlaceholder: 'mcp.tokenHidden' }, placeholder: t('mcp.tokenHidden'),
  });
  const ensureToken = async () => {
    if (tokenInput.value) return tokenInput.value;
    try {
      const token = await api.revealToken(() => confirm(t('confirmRevealToken')));
      if (token) tokenInput.value = token;
      return token;
    } catch (err) {
      app.showError(err);
      return null;
    }
  };
  // The endpoint is where this server really listens (/api/status), not the `port` setting: that one is only
  // what the next `deskbridge serve` asks for, so a client config built from it could point at nothing.
  const runningPort = app.status?.mcp?.port ?? (Number(location.port) || settings.port || 17891);
  const endpoint = () => app.status?.mcp?.url || `http://127.0.0.1:${runningPort}/mcp`;
  const endpointText = h('code#mcp-endpoint', {}, endpoint());
  // The port of the running server changes only when deskbridge restarts; say so instead of pretending.
  const portNote = h('small#mcp-port-note.note', { i18n: 'mcp.portRestart', hidden: String(port.value) === String(runningPort) });
  port.addEventListener('input', () => {
    portNote.hidden = String(port.value) === String(runningPort);
  });
  const clientConfig = () => JSON.stringify({
    mcpServers: { deskbridge: { type: 'http', url: endpoint(), headers: { Authorization: `Bearer ${tokenInput.value}` } } },
  }, null, 2);

  const scope = h('div.radios', { role: 'radiogroup' }, SCOPES.map((key) => h('label', {},
    h('input', { type: 'radio', name: 'mcp-scope', value: key, checked: (settings.access_scope || 'current_folder') === key }),
    h('span', { i18n: `scope.${key}` }))));
  const roots = h('textarea#mcp-roots.mono', { rows: 2, dataset: { i18nPlaceholder: 'customRootsHint' }, placeholder: t('customRootsHint') },
    (settings.custom_roots || []).join('\n'));
  const requireApproval = h('input#mcp-require-approval', { type: 'checkbox', checked: settings.require_approval !== false });
  const viaClient = h('input#mcp-approvals-via-client', { type: 'checkbox', checked: settings.approvals_via_client !== false });
  const rules = settings.approval_rules || {};
  const ruleNames = [...new Set([...RULES, ...Object.keys(ruleDefaults), ...Object.keys(rules)])];
  // Checked = asks the person: the setting's override, else the kind's default (saving asks nobody by default).
  const asks = (key) => (key in rules ? rules[key] : (ruleDefaults[key] ?? true));
  const ruleBoxes = ruleNames.map((key) => [key, h('input', { type: 'checkbox', checked: asks(key), dataset: { rule: key } })]);
  const state = mcpState(app.status, app.settings);
  const live = h(`span#mcp-live.status-pill.${state}`, { i18n: `mcp.${state}` });

  const body = h('form.settings', { onsubmit: (e) => e.preventDefault() },
    h('div.row', {}, h('label.check', {}, enabled, h('span', { i18n: 'mcp.enabled' })), live),
    h('label.field', {}, h('span', { i18n: 'mcp.address' }), h('input', { type: 'text', value: '127.0.0.1', readOnly: true, title: t('mcp.loopbackOnly') })),
    h('label.field', {}, h('span', { i18n: 'mcp.port' }), h('span.row-inline', {}, port, portNote)),
    h('div.field', {}, h('span', { i18n: 'mcp.token' }),
      h('div.row-inline', {}, tokenInput,
        h('button#mcp-token-show', { type: 'button', i18n: 'show', onclick: async (e) => {
          const shown = tokenInput.type === 'text';
          if (!shown && !(await ensureToken())) return;
          tokenInput.type = shown ? 'password' : 'text';
          e.target.dataset.i18n = shown ? 'show' : 'hide';
          e.target.textContent = t(e.target.dataset.i18n);
        } }),
        h('button#mcp-token-rotate', { type: 'button', i18n: 'regenerate', onclick: async () => {
          if (!confirm(t('confirmRotate'))) return;
          try {
            await api.rotateToken();
            tokenInput.value = ''; // showing the new one is a separate, confirmed step
            tokenInput.type = 'password';
            toast(t('tokenRotated'), 'ok');
          } catch (err) { app.showError(err); }
        } }),
        h('button#mcp-token-copy', { type: 'button', i18n: 'copy', onclick: async () => {
          const token = await ensureToken();
          if (token) copyText(token);
        } }))),
    h('div.field', {}, h('span', { i18n: 'mcp.endpoint' }),
      h('div.row-inline', {}, endpointText,
        h('button#mcp-endpoint-copy', { type: 'button', i18n: 'copy', onclick: () => copyText(endpoint()) }),
        h('button#mcp-config-copy', { type: 'button', i18n: 'copyClientConfig', onclick: async () => {
          if (await ensureToken()) copyText(clientConfig());
        } }))),
    h('fieldset', {}, h('legend', { i18n: 'mcp.scope' }), scope, roots),
    h('fieldset', {}, h('legend', { i18n: 'mcp.approvals' }),
      h('label.check', {}, requireApproval, h('span', { i18n: 'mcp.requireApproval' })),
      h('label.check', {}, viaClient, h('span', { i18n: 'mcp.approvalsViaClient' })),
      h('small.note', { i18n: 'mcp.approvalsViaClientHint' }),
      h('div.rules', {}, ruleBoxes.map(([key, box]) => h('label.check.small', {}, box, h('span', { i18n: `rule.${key}` }))))),
  );
  const save = async () => {
    const chosen = body.querySelector('input[name=mcp-scope]:checked')?.value || 'current_folder';
    // Only what differs from the defaults is stored, so a later change of a default still reaches this person.
    const approvalRules = Object.fromEntries(ruleBoxes
      .filter(([key, box]) => box.checked !== (ruleDefaults[key] ?? true))
      .map(([key, box]) => [key, box.checked]));
    try {
      app.settings = await api.saveSettings({
        mcp_enabled: enabled.checked,
        port: Number(port.value),
        access_scope: chosen,
        custom_roots: roots.value.split('\n').map((s) => s.trim()).filter(Boolean),
        require_approval: requireApproval.checked,
        approvals_via_client: viaClient.checked,
        approval_rules: approvalRules,
      });
      dlg.close();
      toast(t('settingsSaved'), 'ok');
      app.refreshPlatform();
    } catch (err) {
      app.showError(err);
    }
  };
  const dlg = modal('panel-mcpSettings', 'panel.mcpSettings', body, {
    actions: [
      h('button#mcp-cancel', { type: 'button', i18n: 'cancel', onclick: () => dlg.close() }),
      h('button#mcp-save.primary', { type: 'button', i18n: 'save', onclick: save }),
    ],
  });
}

// ---------------------------------------------------------------------------------------------------- audit

async function auditPanel(app) {
  const body = h('div#audit-body.audit');
  modal('panel-audit', 'panel.audit', body, {
    wide: true,
    actions: [h('button', { type: 'button', i18n: 'refresh', onclick: () => refreshAudit(app) })],
  });
  await refreshAudit(app);
}

export async function refreshAudit(app) {
  const body = $('#audit-body');
  if (!body) return;
  let records = [];
  try {
    records = (await api.audit(100)).records || [];
  } catch (err) {
    app.showError(err);
  }
  if (!records.length) { body.replaceChildren(h('p.empty', { i18n: 'audit.none' })); return; }
  const cell = (v) => h('td', {}, v == null || v === '' ? '—' : String(v));
  const when = (r) => {
    const ts = r.timestamp ?? r.time ?? r.ts;
    const d = typeof ts === 'number' ? new Date(ts < 1e12 ? ts * 1000 : ts) : new Date(ts);
    return Number.isNaN(d.getTime()) ? ts : d.toLocaleTimeString();
  };
  body.replaceChildren(h('table.audit-table', {},
    h('thead', {}, h('tr', {}, ['audit.time', 'audit.caller', 'audit.tool', 'audit.target', 'audit.outcome', 'audit.approval', 'audit.ms']
      .map((key) => h('th', { i18n: key })))),
    h('tbody', {}, [...records].reverse().map((r) => h(`tr.${(r.outcome || 'ok') === 'ok' ? 'ok' : 'failed'}`, {},
      cell(when(r)), cell(r.client_name || r.clientName || r.client || r.caller), cell(r.tool), cell(r.target),
      cell(r.outcome ?? (r.ok === false ? r.error : 'ok')), cell(r.approval), cell(r.duration_ms ?? r.durationMs))))));
}

// ------------------------------------------------------------------------------------------------- approvals

const queue = [];
let showing = null;

/** Show an approval request `{id, client, tool, target, summary, diff}`; several queue up, one dialog at a time. */
export function showApproval(app, request) {
  if (showing?.id === request.id || queue.some((r) => r.id === request.id)) return;
  queue.push(request);
  if (!showing) next(app);
}

export function closeApproval(id) {
  const index = queue.findIndex((r) => r.id === id);
  if (index >= 0) queue.splice(index, 1);
  if (showing && showing.id === id) {
    $('#approval-dialog')?.remove();
    showing = null;
    if (queue.length) next(window.deskbridge);
  }
}

function diffView(diff) {
  const pre = h('pre#approval-diff.diff');
  const lines = String(diff || '').split('\n');
  for (const line of lines.slice(0, 4000)) {
    const kind = line.startsWith('+++') || line.startsWith('---') ? 'file'
      : line.startsWith('@@') ? 'hunk' : line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : 'ctx';
    pre.append(h(`span.diff-line.${kind}`, {}, `${line}\n`));
  }
  if (lines.length > 4000) pre.append(h('span.diff-line.hunk', {}, t('diffTruncated')));
  return pre;
}

let keyHandler = null;

function next(app) {
  const request = queue.shift();
  if (!request) return;
  showing = request;
  const shownAt = performance.now();
  const notice = h('p.too-soon', { hidden: true, i18n: 'approval.tooSoon' });
  let answered = false;
  const answer = async (approved) => {
    if (answered) return;
    if (!answerable(shownAt)) { notice.hidden = false; return; }
    answered = true;
    try {
      await api.answerApproval(request.id, approved);
      toast(approved ? t('approved') : t('rejected'), approved ? 'ok' : 'warn', 2000);
    } catch (err) {
      app.showError(err);
    }
    closeApproval(request.id);
  };
  // Answered by mouse, or by a shortcut that typing cannot produce; focus is never moved, so it stays where the
  // person was typing (the buttons do not take it when clicked: dom.js passive dialogs).
  if (keyHandler) document.removeEventListener('keydown', keyHandler, true);
  keyHandler = (event) => {
    if (!showing || showing.id !== request.id) return;
    if (!(event.ctrlKey || event.metaKey) || !event.shiftKey || event.altKey) return;
    if (event.key === 'Enter') { event.preventDefault(); event.stopPropagation(); answer(true); }
    if (event.key === 'Backspace') { event.preventDefault(); event.stopPropagation(); answer(false); }
  };
  document.addEventListener('keydown', keyHandler, true);
  // The broker declines after its timeout (core limits.APPROVAL_TIMEOUT_S, 120 s); show the time left.
  const deadline = (request.created ? request.created * 1000 : Date.now()) + (request.timeoutS || 120) * 1000;
  const countdown = h('span#approval-countdown.countdown');
  const tick = () => {
    const left = Math.max(0, Math.round((deadline - Date.now()) / 1000));
    countdown.textContent = t('approval.timeLeft', { time: `${Math.floor(left / 60)}:${String(left % 60).padStart(2, '0')}` });
    if (document.getElementById('approval-dialog')) setTimeout(tick, 1000);
  };
  const body = h('div.approval', {},
    h('p.lead', {}, h('span', { i18n: 'approvalLead' }), ' ', countdown),
    table([
      ['approval.client', request.client || request.client_name || '—'],
      ['approval.tool', request.tool || '—'],
      ['approval.target', request.target || '—'],
      ['approval.summary', request.summary || '—'],
    ]),
    request.diff ? diffView(request.diff) : h('p.empty', { i18n: 'approval.noDiff' }),
    h('p.keys', { i18n: 'approval.keys' }),
    notice);
  // The title names the operation (issue 10): from the request, or from the markdown tool that asks.
  const tool = String(request.tool || '');
  const operation = request.operation || (/export/.test(tool) ? 'export' : /copy/.test(tool) ? 'copy_rich_html'
    : /open/.test(tool) ? 'open_outside' : /save_.*as/.test(tool) ? 'overwrite' : request.diff ? 'edit' : null);
  const title = ['edit', 'export', 'open_outside', 'copy_rich_html', 'overwrite', 'rename', 'delete'].includes(operation)
    ? `approval.title.${operation}` : 'approval.title';
  modal('approval-dialog', title, body, {
    wide: true,
    dismissable: false,
    passive: true,
    onClose: () => { if (showing?.id === request.id) { showing = null; next(app); } },
    actions: [
      h('button#approval-reject.danger', { type: 'button', tabindex: '-1', i18n: 'reject', onclick: () => answer(false) }),
      h('button#approval-approve.primary', { type: 'button', tabindex: '-1', i18n: 'approve', onclick: () => answer(true) }),
    ],
  });
  tick();
}

// ---------------------------------------------------------------------------------------------------- export

function filenameFrom(res, fallback) {
  const header = res.headers.get('content-disposition') || '';
  const star = /filename\*=UTF-8''([^;]+)/i.exec(header);
  if (star) return decodeURIComponent(star[1]);
  const plain = /filename="?([^";]+)"?/i.exec(header);
  return plain ? plain[1] : fallback;
}

export async function exportDocument(app, format) {
  if (!app.docId) return;
  toast(t('exporting'), 'info', 1500);
  try {
    if (app.sync) await app.sync.flush(2000);
    const res = await api.exportFile(app.docId, format);
    const blob = await res.blob();
    const base = (app.doc?.name || 'document').replace(/\.[^.]+$/, '');
    const a = h('a', { href: URL.createObjectURL(blob), download: filenameFrom(res, `${base}.${format}`) });
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  } catch (err) {
    app.showError(err);
  }
}

/** Write rich HTML (plus a plain-text fallback) to the clipboard; false when the browser refuses. */
async function writeRichClipboard(html, text) {
  try {
    await navigator.clipboard.write([new ClipboardItem({
      'text/html': new Blob([html], { type: 'text/html' }),
      'text/plain': new Blob([text], { type: 'text/plain' }),
    })]);
    return true;
  } catch {
    return false;
  }
}

/**
 * An AI client's approved md_ui_copy_rendered_html: the server sends the HTML; the clipboard is written here.
 * Browsers may require a click for clipboard access, so when the direct write is refused the person gets a button.
 */
export async function deliverClipboard(app, data) {
  const label = t(`copy.${data.target}`);
  if (await writeRichClipboard(data.html, data.text || '')) {
    toast(t('copiedRich', { target: label }), 'ok');
    return;
  }
  toast(t('aiClipboardReady', { target: label }), 'info', 30000, {
    label: t('copy'),
    run: () => writeRichClipboard(data.html, data.text || '').then((ok) => ok && toast(t('copied'), 'ok', 1800)),
  });
}

export async function copyRich(app, target) {
  if (!app.docId) return;
  try {
    if (app.sync) await app.sync.flush(2000);
    const { html } = await api.rich(app.docId, target);
    const text = new DOMParser().parseFromString(html, 'text/html').body.textContent || '';
    if (!await writeRichClipboard(html, text)) {
      // Older browsers or no permission: copy through a selection of a hidden rendered copy.
      const holder = h('div', { contenteditable: 'true', style: 'position:fixed;left:-9999px' });
      holder.innerHTML = html;
      document.body.append(holder);
      const range = document.createRange();
      range.selectNodeContents(holder);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      document.execCommand('copy');
      holder.remove();
    }
    toast(t('copiedRich', { target: t(`copy.${target}`) }), 'ok');
  } catch (err) {
    app.showError(err);
  }
}
