// Spell check: the browser's own checker, on for prose (the content DOM says spellcheck="true") and off on lines of
// code — fenced or indented code blocks and front matter — so identifiers are not underlined. Chromium and Firefox
// honour `spellcheck` on a descendant of an editable element (HTML, "Spelling and grammar checking",
// https://html.spec.whatwg.org/multipage/interaction.html#spelling-and-grammar-checking).

import { RangeSetBuilder } from '@codemirror/state';
import { Decoration, EditorView, ViewPlugin } from '@codemirror/view';
import { syntaxTree } from '@codemirror/language';

const codeLine = Decoration.line({ attributes: { spellcheck: 'false' } });
const CODE_NODES = new Set(['FencedCode', 'CodeBlock', 'HTMLBlock', 'CommentBlock']);

function codeLines(view) {
  const builder = new RangeSetBuilder();
  const { doc } = view.state;
  let last = -1;
  for (const { from, to } of view.visibleRanges) {
    syntaxTree(view.state).iterate({
      from, to,
      enter(node) {
        if (!CODE_NODES.has(node.name)) return undefined;
        const start = Math.max(doc.lineAt(node.from).number, last + 1);
        const end = doc.lineAt(Math.min(node.to, to)).number;
        for (let n = start; n <= end; n += 1) builder.add(doc.line(n).from, doc.line(n).from, codeLine);
        last = Math.max(last, end);
        return false;
      },
    });
  }
  return builder.finish();
}

const codeSpellOff = ViewPlugin.fromClass(class {
  constructor(view) { this.decorations = codeLines(view); }
  update(update) {
    if (update.docChanged || update.viewportChanged || syntaxTree(update.startState) !== syntaxTree(update.state)) {
      this.decorations = codeLines(update.view);
    }
  }
}, { decorations: (plugin) => plugin.decorations });

export function spellcheckExtensions() {
  return [EditorView.contentAttributes.of({ spellcheck: 'true', autocorrect: 'off', autocapitalize: 'off' }), codeSpellOff];
}
