// Every server call the editor makes, in one module: the markdown kind's routes (mounted by the platform under
// /api/markdown) and the platform's own routes (settings, token, status, audit, approvals, events).
// If the platform moves a route, this is the only file to change.

const meta = (name, fallback) => document.querySelector(`meta[name="${name}"]`)?.content || fallback;

/** Base of the markdown kind's routes (web.py `markdown_routes`). */
export const MD = meta('deskbridge-md-api', '/api/markdown');
/** Base of the platform's JSON API. */
export const API = meta('deskbridge-api', '/api');
// The per-launch UI secret normally travels in a strict cookie set by the launch URL; a page may also carry it
// in a meta tag (tests, embedding), and then we send it as a header.
const SECRET = meta('deskbridge-ui-secret', '');

export class ApiError extends Error {
  constructor(status, body) {
    const err = body && body.error;
    super(err ? `${err.message}${err.hint ? ` — ${err.hint}` : ''}` : `HTTP ${status}`);
    this.status = status;
    this.body = body;
    this.code = err ? err.code : null;
  }
}

const succeeded = new Set();
/**
 * Call `fn(route)` after every request that succeeds; `route` is `"METHOD /path"` (no query), the same string a
 * failed request's error carries as `err.route` (and `err.unreachable` when the server could not be reached at
 * all) — so the page can take an error down once what failed works again.
 */
export function onRequestOk(fn) { succeeded.add(fn); }

async function request(method, url, body, { signal, raw, intent } = {}) {
  const headers = {};
  if (intent) headers['x-deskbridge-request'] = intent; // web.py REQUEST_HEADER: costly work only from the editor
  if (SECRET) headers['x-deskbridge-ui'] = SECRET;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const route = `${method} ${new URL(url, location.href).pathname}`;
  let res;
  try {
    res = await fetch(url, {
      method, headers, signal, credentials: 'same-origin',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    if (err && typeof err === 'object' && err.name !== 'AbortError') Object.assign(err, { route, unreachable: true });
    throw err;
  }
  if (raw && res.ok) { succeeded.forEach((fn) => fn(route)); return res; }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) throw Object.assign(new ApiError(res.status, data), { route });
  succeeded.forEach((fn) => fn(route));
  return data;
}

const e = encodeURIComponent;
const get = (url, opts) => request('GET', url, undefined, opts);
const post = (url, body, opts) => request('POST', url, body ?? {}, opts);

export const api = {
  // documents and files
  docs: () => get(`${MD}/docs`),
  files: () => get(`${MD}/files`),
  /** Open a document; `encoding` (optional) when it is not UTF-8 (the server names the ones it reads). */
  open: (path, encoding) => post(`${MD}/open`, encoding ? { path, encoding } : { path }),
  doc: (id) => get(`${MD}/docs/${e(id)}`),
  // collab (@codemirror/collab authority; positions in UTF-16 units)
  push: (id, version, updates) => post(`${MD}/docs/${e(id)}/push`, { version, updates }),
  pull: (id, version, signal) => get(`${MD}/docs/${e(id)}/pull?version=${version}`, { signal }),
  /** Server-rendered preview; `range` {from, to} (1-based lines) asks for a window of a large document. */
  preview: (id, range) => get(`${MD}/docs/${e(id)}/preview${range ? `?from=${range.from}&to=${range.to}` : ''}`),
  /** Prefix for images the document refers to by relative path. */
  assetBase: (id) => `${MD}/docs/${e(id)}/asset/`,
  selection: (id, body) => post(`${MD}/docs/${e(id)}/selection`, body),
  save: (id) => post(`${MD}/docs/${e(id)}/save`),
  external: (id, action) => post(`${MD}/docs/${e(id)}/external`, { action }),
  exportFile: (id, format) => post(`${MD}/docs/${e(id)}/export`, { format }, { raw: true, intent: 'export' }),
  rich: (id, target) => get(`${MD}/docs/${e(id)}/rich?target=${e(target)}`),
  // view state, clients, draft barrier
  /** {defaults, overrides, enabled}: which operations ask the person (approvals.py). */
  approvalRules: () => get(`${MD}/approval-rules`),
  uiGet: () => get(`${MD}/ui`),
  uiSet: (partial) => post(`${MD}/ui`, partial),
  /** The change an AI's editor command would make, prepared here (editor_commands.py). */
  commandResult: (requestId, body) => post(`${MD}/commands/${e(requestId)}`, body),
  // The platform's draft barrier, the same for every kind's editor (core/lifecycle.py DraftBarrier): this tab
  // is registered while its event stream (`eventsUrlFor`) is open and answers each `prepare` event.
  editorAck: (operationId, clientId, hasDrafts, detail) => post(`${API}/editors/ack`, { operationId, clientId, hasDrafts, detail }),
  /** Whether this tab holds unsynced edits, for status displays only (never trusted for a save). */
  editorReport: (clientId, hasDrafts) => post(`${API}/editors/report`, { clientId, hasDrafts }),
  // the platform (lead's routes)
  settings: () => get(`${API}/settings`),
  saveSettings: (partial) => post(`${API}/settings`, partial),
  // The MCP token is never fetched silently (docs/security.md): ask for a one-time request, let the person
  // confirm in the page (`confirmed(question)`), then redeem that request. Null when the person said no.
  revealToken: async (confirmed) => {
    const ask = await post(`${API}/token/reveal`);
    if (!confirmed(ask.question)) return null;
    return (await post(`${API}/token/reveal/${encodeURIComponent(ask.requestId)}`, { confirmed: true })).token;
  },
  rotateToken: () => post(`${API}/token/rotate`),
  status: () => get(`${API}/status`),
  audit: (limit = 100) => get(`${API}/audit?limit=${limit}`),
  approvals: () => get(`${API}/approvals`),
  answerApproval: (id, approved) => post(`${API}/approvals/${e(id)}`, { approved }),
  /** A declared tool, through App.invoke as caller `ui` (validated, audited): the editor's file operations. */
  tool: (name, args) => post(`${API}/tools/${e(name)}`, { arguments: args ?? {} }),
  eventsUrl: `${API}/events`,
  eventsUrlFor: (clientId) => `${API}/events?editor=${e(clientId)}`,
};
