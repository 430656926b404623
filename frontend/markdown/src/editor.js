// The CodeMirror 6 source editor: Markdown highlighting, history, search/replace, collab, and switchable parts
// (line numbers, UI language of CodeMirror's own panels) held in compartments so they change without a reload.

import { Compartment, EditorState } from '@codemirror/state';
import {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection, dropCursor,
  rectangularSelection, crosshairCursor, highlightSpecialChars,
} from '@codemirror/view';
import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands';
import { search, searchKeymap, highlightSelectionMatches } from '@codemirror/search';
import { closeBrackets, closeBracketsKeymap } from '@codemirror/autocomplete';
import { HighlightStyle, syntaxHighlighting, indentOnInput, bracketMatching } from '@codemirror/language';
import { markdown, markdownLanguage } from '@codemirror/lang-markdown';
import { tags } from '@lezer/highlight';
import { collabExtensions } from './collab.js';
import { markdownLiteSupport } from './markdown-lite.js';
import { formatKeymap } from './commands.js';
import { cmPhrases } from './i18n.js';
import { spellcheckExtensions } from './spellcheck.js';

// Colours come from CSS variables so the app themes (app.css) recolour the syntax too.
const markdownHighlight = HighlightStyle.define([
  { tag: tags.heading1, color: 'var(--syn-heading)', fontWeight: '700', fontSize: '1.18em' },
  { tag: tags.heading2, color: 'var(--syn-heading)', fontWeight: '700', fontSize: '1.1em' },
  { tag: [tags.heading3, tags.heading4, tags.heading5, tags.heading6, tags.heading], color: 'var(--syn-heading)', fontWeight: '700' },
  { tag: tags.strong, fontWeight: '700', color: 'var(--syn-strong)' },
  { tag: tags.emphasis, fontStyle: 'italic', color: 'var(--syn-em)' },
  { tag: tags.strikethrough, textDecoration: 'line-through' },
  { tag: [tags.link, tags.url], color: 'var(--syn-link)' },
  { tag: tags.monospace, color: 'var(--syn-code)', fontFamily: 'var(--mono)' },
  { tag: [tags.processingInstruction, tags.meta, tags.contentSeparator], color: 'var(--syn-mark)' },
  { tag: tags.quote, color: 'var(--syn-quote)', fontStyle: 'italic' },
  { tag: tags.list, color: 'var(--syn-mark)' },
  { tag: [tags.comment, tags.labelName], color: 'var(--muted)' },
  { tag: [tags.keyword, tags.typeName, tags.tagName], color: 'var(--syn-keyword)' },
  { tag: [tags.string, tags.attributeValue], color: 'var(--syn-string)' },
]);

/** Above this many characters the editor highlights with the line-based `markdown-lite.js` (see there why). */
export const FULL_PARSE_MAX_CHARS = 1_000_000;

export const lineNumbersSlot = new Compartment();
export const phrasesSlot = new Compartment();

/** A fresh editor state for one document. `onUpdate(update)` sees every view update. */
export function createState({ text, version, clientID, language, showLineNumbers, onUpdate }) {
  return EditorState.create({
    doc: text,
    extensions: [
      lineNumbersSlot.of(showLineNumbers ? [lineNumbers(), highlightActiveLineGutter()] : []),
      phrasesSlot.of(EditorState.phrases.of(cmPhrases(language))),
      highlightSpecialChars(),
      history(),
      drawSelection(),
      dropCursor(),
      EditorState.allowMultipleSelections.of(true),
      indentOnInput(),
      bracketMatching(),
      closeBrackets(),
      rectangularSelection(),
      crosshairCursor(),
      highlightActiveLine(),
      highlightSelectionMatches(),
      search({ top: true }),
      syntaxHighlighting(markdownHighlight),
      text.length > FULL_PARSE_MAX_CHARS ? markdownLiteSupport() : markdown({ base: markdownLanguage }),
      EditorView.lineWrapping,
      keymap.of([...formatKeymap, ...closeBracketsKeymap, ...defaultKeymap, ...searchKeymap, ...historyKeymap, indentWithTab]),
      collabExtensions(version, clientID),
      EditorView.updateListener.of(onUpdate),
      EditorView.contentAttributes.of({ 'aria-label': 'Markdown source' }),
      spellcheckExtensions(), // the browser's spell check for prose, not for code
    ],
  });
}

export function setLineNumbers(view, on) {
  view.dispatch({ effects: lineNumbersSlot.reconfigure(on ? [lineNumbers(), highlightActiveLineGutter()] : []) });
}

export function setPhrases(view, language) {
  view.dispatch({ effects: phrasesSlot.reconfigure(EditorState.phrases.of(cmPhrases(language))) });
}

/** Lines taken by a leading front matter block, 0 when there is none (an unclosed block is not front matter). */
function frontMatterLines(doc) {
  if (!/^(---|\+\+\+)[ \t]*$/.test(doc.line(1).text)) return 0;
  for (let n = 2; n <= doc.lines; n += 1) {
    if (/^(---|\.\.\.|\+\+\+)[ \t]*$/.test(doc.line(n).text)) return n;
  }
  return 0;
}

/** Headings of the document (ATX `#` and Setext), skipping fenced code and a leading front matter block
 * (the same rule as the server's `outline.front_matter_span`: `---`/`+++` … `---`/`...`/`+++`); `line` is 1-based. */
export function outlineOf(doc) {
  const items = [];
  let fence = null;
  let previous = '';
  let lineNo = 0;
  const skip = frontMatterLines(doc);
  for (const iter = doc.iterLines(); !iter.next().done;) {
    const text = iter.value;
    lineNo += 1;
    if (lineNo <= skip) continue;
    const f = /^\s{0,3}(`{3,}|~{3,})/.exec(text);
    if (fence) {
      if (f && f[1][0] === fence[0] && f[1].length >= fence.length) fence = null;
      previous = '';
      continue;
    }
    if (f) { fence = f[1]; previous = ''; continue; }
    const atx = /^\s{0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$/.exec(text);
    if (atx) {
      items.push({ level: atx[1].length, title: (atx[2] || '').replace(/\s+#+$/, ''), line: lineNo });
    } else if (previous.trim() && /^\s{0,3}(=+|-+)\s*$/.test(text) && !/^\s{0,3}([-*+]\s|\d+[.)]\s|>)/.test(previous)) {
      items.push({ level: text.trim()[0] === '=' ? 1 : 2, title: previous.trim(), line: lineNo - 1 });
    }
    previous = text;
  }
  return items;
}

/** Lines, words (CJK characters count one each) and characters (code points) of a text. */
export function countText(doc) {
  let words = 0;
  let chars = 0;
  const wordRe = /[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af]|[\p{L}\p{N}_'’-]+/gu;
  let first = true;
  // Line by line, so a word is never split between two chunks of the document tree.
  for (const iter = doc.iterLines(); !iter.next().done;) {
    const line = iter.value;
    if (!first) chars += 1;
    first = false;
    for (const m of line.matchAll(wordRe)) { if (m[0]) words += 1; }
    chars += line.length - (line.match(/[\ud800-\udbff][\udc00-\udfff]/g)?.length || 0);
  }
  return { lines: doc.lines, words, chars };
}
