// Checks that every UI string exists in all four languages and that every key the sources use is defined.
// `node check-i18n.mjs` prints a JSON summary (also read by tests/kinds/markdown/ui/test_i18n.py) and exits 1
// on a missing or empty translation.
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { STRINGS, LANGUAGES, THEMES, TYPOGRAPHIES } from './src/i18n.js';

const here = dirname(fileURLToPath(import.meta.url));
const problems = [];
// The command names are read from the source text, not imported: this check must run without node_modules
// (the test suite runs it on a fresh clone, where only the committed bundle exists).
const commandsSource = readFileSync(join(here, 'src', 'commands.js'), 'utf8');
const commandsBlock = commandsSource.slice(commandsSource.indexOf('export const editorCommands = {'));
const commandNames = [...commandsBlock.slice(0, commandsBlock.indexOf('\n};')).matchAll(/^ {2}(\w+)(?::|,)/gm)].map((m) => m[1]);

for (const [key, entry] of Object.entries(STRINGS)) {
  if (!Array.isArray(entry) || entry.length !== LANGUAGES.length || entry.some((s) => typeof s !== 'string' || !s.trim())) {
    problems.push(`${key}: needs ${LANGUAGES.length} non-empty strings`);
  }
}

// Literal keys in the sources: t('key'), i18n: 'key', i18nTitle: 'key', label: 'key', i18nPlaceholder: 'key'.
const used = new Set();
const literal = /(?:\bt\(|i18n:\s*|i18nTitle:\s*|label:\s*|i18nPlaceholder:\s*)'([A-Za-z][\w.-]*)'/g;
for (const name of readdirSync(join(here, 'src')).filter((n) => n.endsWith('.js'))) {
  const source = readFileSync(join(here, 'src', name), 'utf8');
  for (const m of source.matchAll(literal)) used.add(m[1]);
}
// Keys built from a list at run time.
const families = {
  theme: THEMES, typo: TYPOGRAPHIES, cmd: commandNames,
  mcp: ['running', 'stopped', 'portBusy', 'tokenMissing', 'enabled', 'address', 'port', 'token', 'endpoint', 'scope', 'approvals', 'requireApproval', 'loopbackOnly', 'portRestart'],
  scope: ['current_document', 'current_folder', 'custom_folder'],
  rule: ['edit', 'overwrite', 'open_outside', 'copy_rich_html', 'export', 'save', 'save_as'],
  copy: ['wechat', 'zhihu', 'juejin'],
  panel: ['find', 'replace', 'properties', 'wordCount', 'mcpSettings', 'audit', 'changelog', 'thanks', 'about'],
};
for (const [prefix, names] of Object.entries(families)) for (const n of names) used.add(`${prefix}.${n}`);
for (const key of used) if (!(key in STRINGS)) problems.push(`${key}: used but not defined`);

console.log(JSON.stringify({
  keys: Object.keys(STRINGS).length, used: used.size, languages: LANGUAGES.map(([code]) => code),
  themes: THEMES, typographies: TYPOGRAPHIES, commands: commandNames, problems,
}));
process.exit(problems.length ? 1 : 0);
