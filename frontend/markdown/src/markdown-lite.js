// A line-by-line Markdown highlighter for very large documents. @lezer/markdown keeps the document's blocks as
// one flat list, so each keystroke's incremental reparse walks all of them: on a 120,000-line document that is
// tens of milliseconds per key. This stream language only looks at the lines on screen (plus a small state:
// inside a code fence or not), so typing stays instant; it highlights headings, quotes, lists, fences, code
// spans, emphasis and links — enough to read by, without the full syntax tree (no folding by section).
import { StreamLanguage } from '@codemirror/language';

const HEADING = /^\s{0,3}#{1,6}(?=\s|$)/;
const FENCE = /^\s{0,3}(`{3,}|~{3,})/;

const markdownLite = StreamLanguage.define({
  name: 'markdown-lite',
  startState: () => ({ fence: null, heading: false }),
  copyState: (s) => ({ fence: s.fence, heading: s.heading }),
  token(stream, state) {
    if (stream.sol()) {
      state.heading = false;
      const fence = stream.match(FENCE, false);
      if (state.fence) {
        if (fence && fence[1][0] === state.fence[0] && fence[1].length >= state.fence.length) state.fence = null;
        stream.skipToEnd();
        return 'monospace';
      }
      if (fence) { state.fence = fence[1]; stream.skipToEnd(); return 'meta'; }
      if (stream.match(HEADING)) { state.heading = true; return 'meta'; }
      if (stream.match(/^\s{0,3}>\s?/)) return 'quote';
      if (stream.match(/^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?/)) return 'list';
      if (stream.match(/^\s{0,3}(?:[-*_]\s*){3,}$/)) return 'contentSeparator';
    }
    if (state.heading) { stream.skipToEnd(); return 'heading'; }
    if (stream.match(/^`+[^`]*`+/)) return 'monospace';
    if (stream.match(/^(\*\*|__)(?=\S)(.+?)\1/)) return 'strong';
    if (stream.match(/^(\*|_)(?=\S)(.+?)\1/)) return 'emphasis';
    if (stream.match(/^~~(?=\S)(.+?)~~/)) return 'strikethrough';
    if (stream.match(/^!?\[[^\]]*\]\([^)]*\)/)) return 'link';
    if (stream.match(/^<https?:\/\/[^>]+>/) || stream.match(/^https?:\/\/\S+/)) return 'url';
    stream.next();
    stream.eatWhile(/[^`*_~![<h]/);
    return null;
  },
  tokenTable: {},
});

export function markdownLiteSupport() {
  return markdownLite;
}
