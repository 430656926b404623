// Stand-in for @codemirror/lang-html inside the bundle. @codemirror/lang-markdown only needs an HTML language for
// raw HTML blocks; the full package also pulls in the CSS and JavaScript grammars (~125 KiB minified) to highlight
// <style>/<script> inside HTML, which a Markdown editor does not need. Tags stay highlighted (the @lezer/html
// grammar carries its own highlighting); HTML tag completion is dropped.
import { LRLanguage, LanguageSupport } from '@codemirror/language';
import { parser } from '@lezer/html';

const htmlLanguage = LRLanguage.define({ name: 'html', parser, languageData: {} });

export function html() {
  return new LanguageSupport(htmlLanguage);
}

export function htmlCompletionSource() {
  return null;
}
