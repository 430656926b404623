// The live preview: HTML comes from the server's renderer (one renderer for preview and export), is cleaned of
// anything executable, and math is typeset in the browser with KaTeX (loaded only when a page has math).

const DROP_TAGS = new Set(['SCRIPT', 'IFRAME', 'OBJECT', 'EMBED', 'BASE', 'META', 'LINK', 'FORM', 'FRAME', 'FRAMESET', 'NOSCRIPT']);
const URL_ATTRS = new Set(['href', 'src', 'xlink:href', 'action', 'formaction', 'poster', 'srcset']);

/**
 * Remove scripts, event handlers and javascript: URLs. The page's Content-Security-Policy already forbids inline
 * script; this second layer keeps a hostile document from even trying (an AI can write any HTML into a .md file).
 */
export function sanitize(html, assetBase = null) {
  const doc = new DOMParser().parseFromString(`<body>${html}</body>`, 'text/html');
  const walker = doc.createTreeWalker(doc.body, NodeFilter.SHOW_ELEMENT);
  const drop = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (DROP_TAGS.has(node.tagName)) { drop.push(node); continue; }
    for (const attr of [...node.attributes]) {
      const name = attr.name.toLowerCase();
      if (name.startsWith('on') || name === 'style' && /expression|url\s*\(\s*['"]?\s*javascript/i.test(attr.value)) {
        node.removeAttribute(attr.name);
      } else if (URL_ATTRS.has(name) && /^\s*(javascript|vbscript|data:text\/html)/i.test(attr.value.replace(/[\u0000-\u001f]/g, ''))) {
        node.removeAttribute(attr.name);
      }
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
  return doc.body.innerHTML;
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
export async function showPreview(element, html, lineOffset = 0, assetBase = null) {
  const scroll = element.parentElement ? element.parentElement.scrollTop : 0;
  element.innerHTML = sanitize(html, assetBase);
  if (lineOffset) {
    for (const el of element.querySelectorAll('[data-source-line]')) {
      el.dataset.sourceLine = String(Number(el.dataset.sourceLine) + lineOffset);
    }
  }
  await typesetMath(element);
  if (element.parentElement) element.parentElement.scrollTop = scroll;
}

/** Scroll the preview so the block rendered from source line `line` (1-based) is at the top; false if none. */
export function scrollPreviewToLine(element, line) {
  const scroller = element.parentElement;
  let best = null;
  for (const el of element.querySelectorAll('[data-source-line]')) {
    if (Number(el.dataset.sourceLine) <= line) best = el; else break;
  }
  if (!best || !scroller) return false;
  scroller.scrollTop = Math.max(0, best.offsetTop - 16); // .preview-scroll is the offsetParent (position: relative)
  return true;
}
