// The live preview: HTML comes from the server's renderer (one renderer for preview and export), is cleaned of
// anything executable, and math is typeset in the browser with KaTeX (loaded only when a page has math).
//
// A document is hostile (issue 8): the preview lives in an `<iframe sandbox="allow-same-origin" srcdoc>` with
// its own Content-Security-Policy. Without `allow-scripts` nothing in it can run (no inline script, no
// handler, no javascript: URL, no form, no popup, no top navigation), and whatever it draws is clipped to the
// frame's box, so it can never cover the approval dialog. `allow-same-origin` (never together with
// `allow-scripts`) only lets this page's own code reach into the frame to typeset math, map double-clicks
// and task boxes to source lines and scroll it. Remote images load only when the person asks (a click on the
// placeholder, or the "allow remote images" switch): the server hands them over as `data-remote-src`.

const DROP_TAGS = new Set(['SCRIPT', 'IFRAME', 'OBJECT', 'EMBED', 'BASE', 'META', 'LINK', 'FORM', 'FRAME', 'FRAMESET', 'NOSCRIPT']);
const URL_ATTRS = new Set(['href', 'src', 'xlink:href', 'action', 'formaction', 'poster', 'srcset']);

/**
 * Remove scripts, event handlers and javascript: URLs. The page's Content-Security-Policy already forbids inline
 * script; this second layer keeps a hostile document from even trying (an AI can write any HTML into a .md file).
 */
export function sanitize(html, assetBase = null, remote = { all: false, loaded: new Set() }) {
  const doc = new DOMParser().parseFromString(`<body>${html}</body>`, 'text/html');
  const walker = doc.createTreeWalker(doc.body, NodeFilter.SHOW_ELEMENT);
  const drop = [];
  const blocked = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (DROP_TAGS.has(node.tagName)) { drop.push(node); continue; }
    for (const attr of [...node.attributes]) {
      const name = attr.name.toLowerCase();
      if (name.startsWith('on') || name === 'style' && /expression|url\s*\(|position|z-index|transform|inset/i.test(attr.value)) {
        node.removeAttribute(attr.name);
      } else if (URL_ATTRS.has(name) && /^\s*(javascript|vbscript|data:text\/html)/i.test(attr.value.replace(/[\u0000-\u001f]/g, ''))) {
        node.removeAttribute(attr.name);
      }
    }
    // A remote image waits for the person (render.py hold_remote_images): a placeholder, or the picture when
    // remote images are allowed or this one was asked for.
    if (node.tagName === 'IMG' && node.hasAttribute('data-remote-src')) {
      const url = node.getAttribute('data-remote-src');
      if (/^https?:\/\//i.test(url) && (remote.all || remote.loaded.has(url))) node.setAttribute('src', url);
      else blocked.push(node);
      continue;
    }
    // A local image (relative path) is fetched through the document's asset route (web.py `asset`).
    const src = node.tagName === 'IMG' ? node.getAttribute('src') : null;
    if (assetBase && src && !/^([a-z][a-z0-9+.-]*:|\/\/|\/|#)/i.test(src)) node.setAttribute('src', assetBase + src);
    // Task boxes become clickable: ticking one edits the source (main.js toggleTask).
    if (node.tagName === 'INPUT' && node.getAttribute('type') === 'checkbox') node.removeAttribute('disabled');
    if (node.tagName === 'A' && /^https?:/i.test(node.getAttribute('href') || '')) {
      node.setAttribute('target', '_blank');
      node.setAttribute('rel', 'noopener noreferrer');
    }
  }
  for (const node of drop) node.remove();
  for (const img of blocked) {
    const url = img.getAttribute('data-remote-src') || '';
    let host = '';
    try { host = new URL(url).host; } catch { /* shown without a host */ }
    const holder = doc.createElement('span');
    holder.className = 'remote-image-blocked';
    holder.setAttribute('role', 'button');
    holder.dataset.remoteSrc = url;
    holder.title = url;
    holder.textContent = `${remote.label || 'Remote image blocked — click to load'}${host ? ` (${host})` : ''}${img.alt ? `: ${img.alt}` : ''}`;
    img.replaceWith(holder);
  }
  return doc.body.innerHTML;
}

/** The frame's own policy: nothing runs; images from here, data: and (when allowed) the remote ones. */
function frameCsp(remote) {
  const extra = remote.all ? ' https: http:' : [...remote.loaded].map((u) => ` ${u.replace(/[;,\s'"]/g, encodeURIComponent)}`).join('');
  return `default-src 'none'; script-src 'none'; img-src 'self' data: blob:${extra}; style-src 'self' 'unsafe-inline'; `
    + "font-src 'self' data:; media-src 'none'; object-src 'none'; frame-src 'none'; form-action 'none'; base-uri 'none'";
}

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');

/**
 * (Re)create the sandboxed preview frame inside `container`; resolves with the frame's `<article>` once loaded.
 * `attrs` are copied to the frame's <html> (theme, compact layout) so the preview follows the app's look.
 */
export function mountPreviewFrame(container, { remote, attrs = {}, onReady } = {}) {
  const old = container.querySelector('iframe.preview-frame');
  const scroll = old?.contentDocument?.scrollingElement?.scrollTop || 0;
  const frame = document.createElement('iframe');
  frame.className = 'preview-frame';
  frame.id = 'preview-frame';
  frame.setAttribute('sandbox', 'allow-same-origin');
  frame.setAttribute('referrerpolicy', 'no-referrer');
  frame.setAttribute('title', 'preview');
  const htmlAttrs = Object.entries(attrs).map(([k, v]) => ` ${k}="${esc(v)}"`).join('');
  frame.srcdoc = `<!doctype html><html${htmlAttrs}><head><meta charset="utf-8">`
    + `<meta http-equiv="Content-Security-Policy" content="${esc(frameCsp(remote || { all: false, loaded: new Set() }))}">`
    + '<meta name="referrer" content="no-referrer">'
    + '<link rel="stylesheet" href="/static/app.css"><link rel="stylesheet" href="/static/katex.css">'
    + '<style>html,body{height:auto!important;overflow:visible!important;background:var(--bg)}'
    + 'body{padding:24px 28px 40vh}</style></head>'
    + '<body class="preview-frame-body"><article id="preview" class="preview" aria-live="off"></article></body></html>';
  return new Promise((resolve) => {
    frame.addEventListener('load', () => {
      const article = frame.contentDocument.getElementById('preview');
      frame.contentDocument.scrollingElement.scrollTop = scroll;
      onReady?.(article, frame);
      resolve(article);
    }, { once: true });
    if (old) old.replaceWith(frame); else container.append(frame);
  });
}

// The server marks math for a client renderer (markdown-it dollarmath: span.math.inline / div.math.block);
// other common spellings are accepted too so a renderer change does not silently break math.
const MATH_SELECTOR = '.math.inline, .math.block, .math-inline, .math-display, span.math, div.math, eq, eqn';

let katexPromise = null;
function loadKatex() {
  katexPromise ??= import('./katex-entry.js').then((m) => m.default);
  return katexPromise;
}

async function typesetMath(root) {
  const nodes = [...root.querySelectorAll(MATH_SELECTOR)];
  if (!nodes.length) return 0;
  const katex = await loadKatex();
  for (const node of nodes) {
    if (node.dataset.tex != null) continue;
    const tex = node.textContent.replace(/^\$\$?|\$\$?$/g, '');
    const display = node.matches('.block, .math-display, div, eqn');
    node.dataset.tex = tex;
    try {
      katex.render(tex, node, { displayMode: display, throwOnError: false, output: 'htmlAndMathml', trust: false, strict: 'ignore' });
    } catch (err) {
      node.textContent = tex;
      node.classList.add('math-error');
      node.title = String(err.message || err);
    }
  }
  return nodes.length;
}

/**
 * Put server HTML into the preview element, keeping the reader's scroll position. `lineOffset` shifts the
 * renderer's `data-source-line` marks when the HTML is a window of a large document starting at line offset+1.
 */
export async function showPreview(element, html, lineOffset = 0, assetBase = null, remote = undefined) {
  const scroller = element.ownerDocument.scrollingElement;
  const scroll = scroller ? scroller.scrollTop : 0;
  element.innerHTML = sanitize(html, assetBase, remote);
  if (lineOffset) {
    for (const el of element.querySelectorAll('[data-source-line]')) {
      el.dataset.sourceLine = String(Number(el.dataset.sourceLine) + lineOffset);
    }
  }
  await typesetMath(element);
  if (scroller) scroller.scrollTop = scroll;
}

/** Scroll the preview so the block rendered from source line `line` (1-based) is at the top; false if none. */
export function scrollPreviewToLine(element, line) {
  if (!element) return false;
  const scroller = element.ownerDocument.scrollingElement;
  let best = null;
  for (const el of element.querySelectorAll('[data-source-line]')) {
    if (Number(el.dataset.sourceLine) <= line) best = el; else break;
  }
  if (!best || !scroller) return false;
  scroller.scrollTop = Math.max(0, best.getBoundingClientRect().top + scroller.scrollTop - 16);
  return true;
}
