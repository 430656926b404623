// KaTeX, split into its own chunk and loaded the first time a preview contains math; its stylesheet is a separate
// build output (static/katex.css) linked here, because a lazily imported chunk cannot carry CSS by itself.
import katex from 'katex';

if (!document.querySelector('link[data-katex]')) {
  const link = document.createElement('link');
  link.rel = 'stylesheet';
  link.href = new URL('../katex.css', import.meta.url).href;
  link.dataset.katex = '';
  document.head.append(link);
}

export default katex;
