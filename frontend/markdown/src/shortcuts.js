// Help → Keyboard shortcuts: every key the editor answers to, in one table. The formatting keys are read from the
// keymap itself (commands.js `formatKeymap`), so the list cannot drift from what the keys do.

import { h, modal } from './dom.js';
import { editorCommands, formatKeymap } from './commands.js';

const MAC = /Mac|iPhone|iPad/.test(navigator.platform || '');
const keyName = (spec) => spec.split('-').map((part) => (part === 'Mod' ? (MAC ? '⌘' : 'Ctrl')
  : part.length === 1 ? part.toUpperCase() : part)).join('+');
const mod = MAC ? '⌘' : 'Ctrl';

/** [label key, keys] of everything that is not in formatKeymap. */
const OTHERS = [
  ['save', `${mod}+S`],
  ['file.saveAs', `${mod}+Shift+S`],
  ['cmd.undo', `${mod}+Z`],
  ['cmd.redo', `${mod}+Y / ${mod}+Shift+Z`],
  ['panel.find', `${mod}+F`],
  ['panel.replace', `${mod}+H`],
  ['shortcut.findNext', 'F3 / Enter'],
  ['shortcut.nextOccurrence', `${mod}+D`],
  ['shortcut.gotoLine', `${mod}+Alt+G`],
  ['cmd.selectAll', `${mod}+A`],
  ['shortcut.addCursor', `${MAC ? '⌘' : 'Ctrl'}+click`],
  ['shortcut.columnSelect', 'Alt+drag'],
  ['shortcut.indent', 'Tab / Shift+Tab'],
  ['shortcut.approve', `${mod}+Shift+Enter`],
  ['shortcut.reject', `${mod}+Shift+Backspace`],
  ['shortcut.closeDialog', 'Esc'],
  ['panel.shortcuts', 'F1'],
];

export function shortcutRows() {
  const nameOf = (run) => Object.keys(editorCommands).find((name) => editorCommands[name] === run);
  const format = formatKeymap.map(({ key, run }) => [`cmd.${nameOf(run)}`, keyName(key)]);
  return [...OTHERS.slice(0, 11), ...format, ...OTHERS.slice(11)];
}

export function shortcutsPanel() {
  modal('panel-shortcuts', 'panel.shortcuts',
    h('table#shortcuts-table.kv', {}, h('tbody', {}, shortcutRows().map(([label, keys]) =>
      h('tr', {}, h('th', { i18n: label }), h('td', {}, h('kbd', {}, keys)))))));
}
