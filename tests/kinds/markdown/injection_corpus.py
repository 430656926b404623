"""The hostile-document corpus (issue 8 "Documents are hostile"): Markdown an attacker writes into a `.md` file,
and the checks every HTML the kind hands out must pass — the preview, `md_get_rendered_html`, each export
format and the rich-HTML copies. `{P}` in a vector is the port of a loopback listener that counts every
connection (HTTP and WebSocket alike), so "no request was made" is measured, not assumed.

Used by tests/transport/test_markdown_security.py and tests/e2e/markdown_security_browser_test.py.
"""

from __future__ import annotations

import re
import socket
import threading
from typing import Any

from lxml import html as lxml_html

VECTORS: tuple[tuple[str, str], ...] = (
    ("script-fetch", "<script>fetch('http://127.0.0.1:{P}/v1')</script>"),
    ("img-onerror", "<img src=x onerror=\"fetch('http://127.0.0.1:{P}/v2')\">"),
    ("img-onerror-inline", 'Text <img src="x" onerror=alert(1)//> more'),
    ("img-onerror-slash", "<img src=x/onerror=fetch('http://127.0.0.1:{P}/v4')>"),
    ("svg-onload", "<svg onload=\"fetch('//127.0.0.1:{P}/v5')\"><circle r=1 /></svg>"),
    ("iframe", '<iframe src="http://127.0.0.1:{P}/v6"></iframe>'),
    ("object", '<object data="http://127.0.0.1:{P}/v7"></object>'),
    ("embed", '<embed src="http://127.0.0.1:{P}/v8">'),
    ("form", '<form action="http://127.0.0.1:{P}/v9"><input name=q><button>go</button></form>'),
    ("a-javascript", '<a href="javascript:alert(1)">j</a>'),
    ("md-link-javascript", "[md link](javascript:alert(1))"),
    ("a-entity-javascript", '<a href="JaVaScRiPt&#58;alert(1)">entity</a>'),
    ("a-tab-javascript", '<a href="jav&#x09;ascript:alert(1)">tab</a>'),
    ("a-space-javascript", '<a href=" javascript:alert(1)">space</a>'),
    ("a-vbscript", '<a href="vbscript:msgbox(1)">vb</a>'),
    ("a-data-html", '<a href="data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;">data</a>'),
    ("a-file", '<a href="file:///etc/passwd">file</a>'),
    ("md-link-file", "[file](file:///etc/passwd)"),
    ("a-unc", '<a href="\\\\evil.example\\share\\x">unc</a>'),
    ("md-link-unc", "[unc](<\\\\evil.example\\share>)"),
    ("a-protocol-relative", '<a href="//evil.example/x">protocol-relative</a>'),
    (
        "overlay",
        '<div style="position:fixed;top:0;left:0;width:100%;height:100%;z-index:2147483647;'
        'background:white">Nothing to see: approve</div>',
    ),
    ("css-background-url", '<div style="background-image:url(http://127.0.0.1:{P}/v23)">bg</div>'),
    ("style-import", "<style>@import url(http://127.0.0.1:{P}/v24); body{display:none}</style>"),
    ("link-stylesheet", '<link rel=stylesheet href="http://127.0.0.1:{P}/v25">'),
    ("meta-refresh", '<meta http-equiv="refresh" content="0;url=http://127.0.0.1:{P}/v26">'),
    ("base-href", '<base href="http://127.0.0.1:{P}/">'),
    ("remote-img", '<img src="http://127.0.0.1:{P}/v28.png">'),
    ("md-remote-img", "![pixel](http://127.0.0.1:{P}/v29.png)"),
    ("srcset", '<img srcset="http://127.0.0.1:{P}/v30.png 2x" src="local.png">'),
    (
        "video-poster",
        '<video poster="http://127.0.0.1:{P}/v31"><source src="http://127.0.0.1:{P}/v31b"></video>',
    ),
    ("audio", '<audio src="http://127.0.0.1:{P}/v32" autoplay></audio>'),
    (
        "mathml-href",
        '<math><maction actiontype="statusline" xlink:href="javascript:alert(1)">m</maction></math>',
    ),
    (
        "details-ontoggle",
        "<details open ontoggle=\"fetch('http://127.0.0.1:{P}/v34')\"><summary>d</summary></details>",
    ),
    ("onclick", '<a href="#x" onclick="alert(1)" onmouseover="alert(2)">hover</a>'),
    ("websocket", "<script>new WebSocket('ws://127.0.0.1:{P}/v36')</script>"),
    ("export-by-get", '<img src="/api/markdown/docs/d1/export?format=pdf">'),
    ("noscript-mxss", "<noscript><p title=\"</noscript><img src=x onerror=fetch('//127.0.0.1:{P}/v38')>\">"),
    ("comment-break", "<!--><img src=x onerror=\"fetch('http://127.0.0.1:{P}/v39')\">-->"),
    ("input-image", '<input type="image" src="http://127.0.0.1:{P}/v40">'),
    ("table-background", '<table background="http://127.0.0.1:{P}/v41"><tr><td>t</td></tr></table>'),
    ("transform", '<div style="transform:translate(0,-500px)">moved</div>'),
    ("absolute-span", '<span style="color:red;position:absolute;top:0">abs</span>'),
    ("textarea-break", "<textarea><img src=x onerror=\"fetch('http://127.0.0.1:{P}/v44')\"></textarea>"),
    ("body-onload", "<body onload=\"fetch('http://127.0.0.1:{P}/v45')\">"),
    ("katex-href", "$\\href{javascript:alert(1)}{x}$"),
)
"""(name, Markdown) pairs; `{P}` is replaced by the listener's port."""

BAD_TAGS = {
    "script", "iframe", "object", "embed", "form", "style", "svg", "meta", "link", "base", "button",
    "textarea", "video", "audio", "source", "frame", "frameset", "applet", "noscript", "template", "body",
    "isindex", "maction",
}  # fmt: skip
BAD_SCHEME = re.compile(r"^\s*(javascript|vbscript|file|data|livescript)\s*:", re.I)
BAD_STYLE = re.compile(r"position|z-index|transform|inset|url\s*\(|expression|@import", re.I)
URL_ATTRS = ("href", "src", "action", "formaction", "xlink:href", "poster", "background", "srcset", "data")


def document(port: int) -> str:
    """All vectors in one document, each in its own section."""
    parts = ["# Hostile document\n"]
    for name, vector in VECTORS:
        parts.append(f"## {name}\n\n{vector.replace('{P}', str(port))}\n")
    parts.append("## control\n\n[a fine link](https://example.org/) and **bold**\n")
    return "\n".join(parts)


FORMULA_SVG = {"svg", "g", "path", "rect", "line"}
FORMULA_SVG_ATTRS = {"xmlns", "width", "height", "viewbox", "d", "fill", "stroke", "stroke-width", "style"}
FORMULA_SVG_ATTRS |= {"x", "y", "x1", "y1", "x2", "y2"}


def _formula_svg(el) -> bool:
    """An SVG of geometry only (a typeset formula for WeChat): no element or attribute beyond shapes."""
    return all(
        isinstance(e.tag, str) and e.tag in FORMULA_SVG and set(e.attrib) <= FORMULA_SVG_ATTRS
        for e in el.iter()
    )


def assert_harmless(html: str, *, where: str, images: str = "local", formula_svg: bool = False) -> None:
    """No executable markup, no dangerous URL, no positioning style, and per `images`:
    `local` — only relative or data:image sources; `inline` — only data:image (exports);
    `remote-ok` — http(s) too (rich-HTML copies, whose platforms re-host pictures).
    `formula_svg`: an <svg> of shapes only is allowed (WeChat copies draw formulas so)."""
    root = lxml_html.fragment_fromstring(html, create_parent="div")
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        tag = el.tag.split("}")[-1].lower()
        if formula_svg and tag in FORMULA_SVG and any(a.tag == "svg" for a in [el, *el.iterancestors()]):
            svg = el if tag == "svg" else next(a for a in el.iterancestors() if a.tag == "svg")
            assert _formula_svg(svg), f"{where}: an <svg> with more than shapes survived"
            continue
        assert tag not in BAD_TAGS, f"{where}: <{tag}> survived"
        if tag == "input":
            assert el.get("type") == "checkbox", f"{where}: <input type={el.get('type')}> survived"
        for name, value in el.attrib.items():
            lname = name.split("}")[-1].lower()
            assert not lname.startswith("on"), f"{where}: {name}= on <{tag}> survived"
            if lname in URL_ATTRS:
                assert lname not in ("srcset", "poster", "background", "formaction", "action", "data"), (
                    f"{where}: {name}= on <{tag}> survived"
                )
                v = value.strip()
                if tag == "img" and lname == "src" and v.lower().startswith("data:image/"):
                    continue
                assert not BAD_SCHEME.match(v), f"{where}: {name}={value!r} on <{tag}>"
                assert not v.startswith(("//", "\\")) and "\\" not in v, f"{where}: {name}={value!r}"
                if tag == "img" and lname == "src":
                    if images == "inline":
                        raise AssertionError(f"{where}: <img src={value!r}> is not embedded")
                    if images == "local":
                        assert not re.match(r"^[a-z][a-z0-9+.-]*:", v, re.I), f"{where}: remote <img {v!r}>"
                        assert not v.startswith("/"), f"{where}: <img src={v!r}> reaches the server's routes"
            if lname == "style":
                assert not BAD_STYLE.search(value), f"{where}: style={value!r} on <{tag}>"


class Listener:
    """A loopback TCP listener that counts connections (HTTP, WebSocket, anything) until closed."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.hits: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            conn.settimeout(0.5)
            try:
                self.hits.append(conn.recv(200))
            except OSError:
                self.hits.append(b"")
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
