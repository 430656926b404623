// Build the editor bundle once into src/deskbridge/kinds/markdown/static (committed, so users need no Node).
// `npm ci && npm run build`. KaTeX is split into its own chunk, loaded only when a page shows math; only its
// woff2 fonts are shipped (every current browser reads woff2), which keeps the committed bundle small.

import * as esbuild from 'esbuild';
import { createHash } from 'node:crypto';
import { cpSync, rmSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '../../src/deskbridge/kinds/markdown/static');

const woff2Only = {
  name: 'katex-woff2-only',
  setup(build) {
    build.onLoad({ filter: /katex(\.min)?\.css$/ }, async (args) => {
      const css = await readFile(args.path, 'utf8');
      return { contents: css.replace(/,\s*url\([^)]*\.(?:woff|ttf)\)\s*format\("(?:woff|truetype)"\)/g, ''), loader: 'css' };
    });
  },
};

// See src/html-lite.js: keep lang-markdown's HTML blocks without bundling the CSS/JS grammars.
const htmlLite = {
  name: 'html-lite',
  setup(build) {
    build.onResolve({ filter: /^@codemirror\/lang-html$/ }, () => ({ path: join(here, 'src/html-lite.js') }));
  },
};

for (const name of ['app.js', 'app.css', 'katex.css', 'typography.css', 'chunks', 'fonts']) rmSync(join(out, name), { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const result = await esbuild.build({
  entryPoints: { app: join(here, 'src/main.js'), katex: join(here, 'node_modules/katex/dist/katex.min.css') },
  bundle: true,
  splitting: true,
  format: 'esm',
  minify: true,
  sourcemap: false,
  target: ['chrome109', 'firefox115', 'safari16'],
  outdir: out,
  chunkNames: 'chunks/[name]-[hash]',
  assetNames: 'fonts/[name]',
  loader: { '.woff2': 'file' },
  legalComments: 'eof',
  metafile: true,
  plugins: [woff2Only, htmlLite],
  logLevel: 'warning',
});
cpSync(join(here, 'index.html'), join(out, 'index.html'));
// The typography themes once more as their own file: exports (export.py) inline it, so an exported page looks
// like the preview from the same CSS rather than a second copy of the themes.
cpSync(join(here, 'src/styles/typography.css'), join(out, 'typography.css'));

// The bundled packages' licences (all MIT), so the committed bundle carries its notices.
const packages = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
  if (m) packages.add(m[1]);
}
const notices = [...packages].sort().map((name) => {
  const dir = join(here, 'node_modules', name);
  const meta = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const file = readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
  const text = file ? readFileSync(join(dir, file), 'utf8').trim() : `License: ${meta.license}`;
  return `${name} ${meta.version} (${meta.license})\n\n${text}\n`;
});
writeFileSync(join(out, 'THIRD-PARTY-NOTICES.txt'),
  `Third-party software bundled in the deskbridge Markdown editor (app.js, chunks/, katex.css, fonts/).\n\n${notices.join('\n' + '-'.repeat(78) + '\n\n')}`);

// Which sources this bundle was built from: tests/kinds/markdown/ui/test_static.py recomputes the digest and
// fails when a source changed without a rebuild (the bundle is committed, so it must never go stale).
// (approval-guard.js is the platform's, bundled from src/deskbridge/web/static.)
const sourceFiles = ['build.mjs', 'index.html', 'package-lock.json', '../../src/deskbridge/web/static/approval-guard.js',
  ...readdirSync(join(here, 'src'), { recursive: true }).map((f) => join('src', f))]
  .filter((f) => statSync(join(here, f)).isFile()).map((f) => f.split('\\').join('/')).sort();
const digest = createHash('sha256');
for (const f of sourceFiles) digest.update(`${f}\0`).update(readFileSync(join(here, f))).update('\0');
writeFileSync(join(out, 'build-info.json'), `${JSON.stringify({ sources: digest.digest('hex'), files: sourceFiles.length }, null, 2)}\n`);

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? walk(p) : [[relative(out, p), statSync(p).size]];
  });
}
let total = 0;
for (const [name, size] of walk(out).sort()) {
  total += size;
  if (!name.startsWith('fonts/')) console.log(`${(size / 1024).toFixed(1).padStart(8)} KiB  ${name}`);
}
console.log(`${(total / 1024).toFixed(1).padStart(8)} KiB  total (including KaTeX woff2 fonts)`);
if (result.errors.length) process.exit(1);
