"""Code highlighting for fenced code blocks, server-side with Pygments, so the preview and every export (one
renderer, render.py) colour code alike and the browser runs no highlighter.

markdown-it calls `highlight(code, lang, attrs)` for each fence (markdown-it-py's `highlight` option, as in
markdown-it's README "Syntax highlighting"); what it returns goes inside `<pre><code class="language-…">`.
The tokens are `<span class="hl-…">` (Pygments' short token classes with a prefix, so they cannot collide
with the page's own classes); their colours are in typography.css, from the colour theme's variables. Text is
escaped by Pygments' HtmlFormatter, and the result still passes the kind's allow-list sanitiser (class kept).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

HIGHLIGHT_MAX_CHARS: Final = 50_000
"""A longer code block is shown plain: the preview re-renders while the person types."""
CLASS_PREFIX: Final = "hl-"


@lru_cache(maxsize=64)
def _lexer(lang: str) -> Any | None:
    try:
        from pygments.lexers import get_lexer_by_name
        from pygments.util import ClassNotFound
    except ImportError:  # pragma: no cover - a dependency
        return None
    try:
        return get_lexer_by_name(lang, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=1)
def _formatter() -> Any:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(nowrap=True, classprefix=CLASS_PREFIX)


def highlight(code: str, lang: str, attrs: Any = None) -> str:
    """Highlighted HTML for the inside of the code element, or "" (markdown-it then escapes the code itself)."""
    name = (lang or "").strip().split()[0].lower() if lang and lang.strip() else ""
    if not name or len(code) > HIGHLIGHT_MAX_CHARS:
        return ""
    lexer = _lexer(name)
    if lexer is None:
        return ""
    from pygments import highlight as pygmentize

    return pygmentize(code, lexer, _formatter())
