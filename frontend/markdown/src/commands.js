// Formatting commands (the seed's ui_apply_editor_command list, §7.6): each edits the person's selection as one
// ordinary, undoable change. A command an AI asks for is only *prepared* here (`prepareCommand`) and applied
// by the server as an AI edit after the person approves it (editor_commands.py).

import { EditorSelection, Transaction } from '@codemirror/state';
import { undo, redo, selectAll } from '@codemirror/commands';

/** Whether the markers `before`/`after` sit right outside [from, to) (a single `*` is not half of a `**`). */
function markedAround(state, from, to, before, after) {
  if (from < before.length || state.sliceDoc(from - before.length, from) !== before) return false;
  if (state.sliceDoc(to, to + after.length) !== after) return false;
  if (before === '*') { // italic: `**x**` is bold, not italic; `***x***` is both
    const outer = state.sliceDoc(Math.max(0, from - 3), from);
    if (outer.endsWith('**') && outer !== '***') return false;
  }
  return true;
}

/** Wrap every selection range in `before`/`after`; an empty range gets `placeholder` selected inside.
 * Applied twice it is undone (the toggle writers expect): markers inside or right around the selection go. */
function wrap(view, before, after, placeholder) {
  const { state } = view;
  const tr = state.changeByRange((range) => {
    const text = state.sliceDoc(range.from, range.to);
    if (markedAround(state, range.from, range.to, before, after)) {
      return { changes: [{ from: range.from - before.length, to: range.from }, { from: range.to, to: range.to + after.length }],
        range: EditorSelection.range(range.from - before.length, range.to - before.length) };
    }
    if (text.startsWith(before) && text.endsWith(after) && text.length >= before.length + after.length) {
      const inner = text.slice(before.length, text.length - after.length);
      return { changes: { from: range.from, to: range.to, insert: inner },
        range: EditorSelection.range(range.from, range.from + inner.length) };
    }
    const body = text || placeholder;
    return {
      changes: { from: range.from, to: range.to, insert: before + body + after },
      range: EditorSelection.range(range.from + before.length, range.from + before.length + body.length),
    };
  });
  view.dispatch(state.update(tr, { scrollIntoView: true, userEvent: 'input.format' }));
  view.focus();
  return true;
}

const LINE_MARK = /^(\s*)(#{1,6}\s+|>\s?|[-*+]\s+\[[ xX]\]\s+|[-*+]\s+|\d+[.)]\s+)/;

/** Give every selected line the prefix made by `make(index)`; if all lines already have it, remove it. */
function linePrefix(view, make, test) {
  const { state } = view;
  const lines = [];
  for (const range of state.selection.ranges) {
    for (let pos = range.from; pos <= range.to;) {
      const line = state.doc.lineAt(pos);
      if (!lines.length || lines[lines.length - 1].number !== line.number) lines.push(line);
      pos = line.to + 1;
    }
  }
  const all = lines.every((line) => test(line.text));
  const changes = lines.map((line, i) => {
    const m = LINE_MARK.exec(line.text);
    const indent = m ? m[1] : (/^\s*/.exec(line.text)[0]);
    const oldLen = m ? m[0].length : indent.length;
    return { from: line.from, to: line.from + oldLen, insert: all ? indent : indent + make(i) };
  });
  view.dispatch({ changes, userEvent: 'input.format', scrollIntoView: true });
  view.focus();
  return true;
}

function insertBlock(view, text, selectFrom, selectTo) {
  const { state } = view;
  const range = state.selection.main;
  if (!text.includes('$SEL') && !range.empty) {
    // a table or a rule goes beside the selection (after its last line), never over it
    const end = state.doc.lineAt(range.to);
    const body = text.replace(/^\n+|\n+$/g, '');
    const insert = `\n\n${body}\n`;
    view.dispatch({
      changes: { from: end.to, insert },
      selection: selectFrom == null ? { anchor: end.to + insert.length } : { anchor: end.to + 2 + selectFrom, head: end.to + 2 + selectTo },
      userEvent: 'input.format', scrollIntoView: true,
    });
    view.focus();
    return true;
  }
  const line = state.doc.lineAt(range.from);
  const selected = state.sliceDoc(range.from, range.to);
  const lead = line.from === range.from || line.text.trim() === '' ? '' : '\n';
  const body = text.replace('$SEL', selected);
  const insert = `${lead}${body}\n`;
  const base = range.from + lead.length;
  view.dispatch({
    changes: { from: range.from, to: range.to, insert },
    selection: selectFrom == null ? { anchor: base + body.length } : { anchor: base + selectFrom, head: base + selectTo },
    userEvent: 'input.format', scrollIntoView: true,
  });
  view.focus();
  return true;
}

function clearFormatting(view) {
  const { state } = view;
  const tr = state.changeByRange((range) => {
    const text = state.sliceDoc(range.from, range.to);
    const clean = text
      .split('\n').map((line) => line.replace(LINE_MARK, '$1')).join('\n')
      .replace(/(\*\*|__)(.+?)\1/g, '$2').replace(/(\*|_)(.+?)\1/g, '$2')
      .replace(/~~(.+?)~~/g, '$1').replace(/`([^`]+)`/g, '$1');
    return { changes: { from: range.from, to: range.to, insert: clean },
      range: EditorSelection.range(range.from, range.from + clean.length) };
  });
  view.dispatch(state.update(tr, { userEvent: 'input.format' }));
  view.focus();
  return true;
}

async function copySelection(view) {
  const text = view.state.selection.ranges.map((r) => view.state.sliceDoc(r.from, r.to)).join('\n');
  try { await navigator.clipboard.writeText(text); } catch { document.execCommand('copy'); }
  return true;
}

const isHeading = (n) => (text) => new RegExp(`^\\s*#{${n}}\\s`).test(text);

/** name → function(view) for every command of the seed's allowed list. */
export const editorCommands = {
  undo: (view) => undo(view),
  redo: (view) => redo(view),
  copy: copySelection,
  selectAll: (view) => selectAll(view),
  paragraph: (view) => linePrefix(view, () => '', () => false),
  heading1: (view) => linePrefix(view, () => '# ', isHeading(1)),
  heading2: (view) => linePrefix(view, () => '## ', isHeading(2)),
  heading3: (view) => linePrefix(view, () => '### ', isHeading(3)),
  bold: (view) => wrap(view, '**', '**', 'bold'),
  italic: (view) => wrap(view, '*', '*', 'italic'),
  inlineCode: (view) => wrap(view, '`', '`', 'code'),
  link: (view) => wrap(view, '[', '](https://)', 'link'),
  image: (view) => wrap(view, '![', '](image.png)', 'alt'),
  quote: (view) => linePrefix(view, () => '> ', (t) => /^\s*>/.test(t)),
  orderedList: (view) => linePrefix(view, (i) => `${i + 1}. `, (t) => /^\s*\d+[.)]\s/.test(t)),
  unorderedList: (view) => linePrefix(view, () => '- ', (t) => /^\s*[-*+]\s(?!\[)/.test(t)),
  taskList: (view) => linePrefix(view, () => '- [ ] ', (t) => /^\s*[-*+]\s\[[ xX]\]\s/.test(t)),
  codeFence: (view) => insertBlock(view, '```\n$SEL\n```', 3, 3),
  mathBlock: (view) => insertBlock(view, '$$\n$SEL\n$$', 3, 3),
  table: (view) => insertBlock(view, '| Column | Column |\n| --- | --- |\n| Cell | Cell |', 2, 8),
  horizontalRule: (view) => insertBlock(view, '\n---\n'),
  clearFormatting,
};

/** The transaction `name` would dispatch on `state`, without applying it (null when it does nothing). */
export function prepareCommand(state, name) {
  const command = editorCommands[name];
  if (!command || name === 'undo' || name === 'redo' || name === 'copy') return null;
  let captured = null;
  const scratch = {
    state,
    dispatch: (spec) => { captured = spec instanceof Transaction ? spec : state.update(spec); },
    focus: () => {},
  };
  command(scratch);
  return captured;
}

export function runEditorCommand(view, name) {
  const command = editorCommands[name];
  return command ? command(view) : false;
}

export const formatKeymap = [
  { key: 'Mod-b', run: editorCommands.bold },
  { key: 'Mod-i', run: editorCommands.italic },
  { key: 'Mod-e', run: editorCommands.inlineCode },
  { key: 'Mod-k', run: editorCommands.link },
  { key: 'Mod-1', run: editorCommands.heading1 },
  { key: 'Mod-2', run: editorCommands.heading2 },
  { key: 'Mod-3', run: editorCommands.heading3 },
];
