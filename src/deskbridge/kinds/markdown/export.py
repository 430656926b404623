"""Exports of a Markdown document: self-contained HTML, PDF and PNG (headless Chromium), Word (pandoc), and
rich HTML with inline styles for pasting into WeChat / Zhihu / Juejin editors.

All start from the one renderer (render.py). Exported HTML is self-contained: the typography CSS is inlined,
local images become data URIs, and math is converted to MathML (latex2mathml) so it shows without scripts
(browsers render MathML Core natively; research/markdown.md §3 "Math server-side"). The themes here are our
own small palettes named after the typography keys; mdnice's theme CSS is GPL and is not used.
"""

from __future__ import annotations

import asyncio
import base64
import html as html_lib
import json
import mimetypes
import re
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, urlparse

from lxml import html as lxml_html

from deskbridge.core import files
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.policy import ApprovalText
from deskbridge.core.tools import CallContext
from deskbridge.kinds.markdown.render import EXPORT, render_html, yaml_has_aliases
from deskbridge.kinds.markdown.sanitize import safe_url

if TYPE_CHECKING:
    from deskbridge.kinds.markdown.document import MarkdownDocument
    from deskbridge.kinds.markdown.service import MarkdownService

CHROMIUM_PATH: Final = "/usr/bin/chromium"
CHROMIUM_ARGS: Final = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    # Belt and braces under the per-request block below: every connection, WebSockets included, goes to a
    # proxy that is not there, loopback too.
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
)
IMAGE_MAX_BYTES: Final = 16 * 1024 * 1024
"""A local image larger than this stays a link instead of becoming a data URI."""
CHROMIUM_TIMEOUT_MS: Final = 60_000

EXPORT_CSP: Final = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; form-action 'none'"
)
"""The exported HTML's own policy: nothing runs, nothing is fetched (images are data URIs)."""

EXPORTS_QUEUED_MAX: Final = 4
"""Exports that may wait for the running one (per workspace); more are refused, so a document that asks for
many cannot start many browsers."""

FORMATS: Final = {"HTML": ".html", "PDF": ".pdf", "PNG": ".png", "Word": ".docx"}

# --- themes ---------------------------------------------------------------------------------------------


def theme_accent(typography: str | None) -> str:
    """The typography theme's accent colour as `#rrggbb`, read from the preview's own stylesheet (its
    `--t-accent`, resolved against the light colour theme's variables), so Word headings match the preview."""
    css, key = export_css(typography)
    variables = dict(re.findall(r"(--[\w-]+):\s*(#[0-9a-fA-F]{6})", _EXPORT_PAGE_CSS))
    found = re.search(rf'\.preview\[data-typo="{key}"\]\s*\{{[^}}]*?--t-accent:\s*([^;]+);', css)
    value = found.group(1).strip() if found else "var(--accent)"
    ref = re.fullmatch(r"var\((--[\w-]+)\)", value)
    if ref is not None:
        value = variables.get(ref.group(1), "#1f2328")
    return value if re.fullmatch(r"#[0-9a-fA-F]{6}", value) else "#1f2328"


def theme_styles(typography: str | None = None) -> dict[str, str]:
    """Element → inline style for rich-HTML copies, in the typography theme's accent (`theme_accent`: the
    preview's stylesheet is the one palette)."""
    a = theme_accent(typography)
    return {
        "section": "font-family:-apple-system,'Segoe UI','PingFang SC','Microsoft YaHei',sans-serif;"
        "font-size:16px;line-height:1.75;color:#333;word-break:break-word;",
        "h1": f"font-size:1.8em;margin:1.2em 0 .6em;font-weight:bold;color:{a};",
        "h2": f"font-size:1.5em;margin:1.1em 0 .6em;font-weight:bold;color:{a};border-bottom:2px solid {a};padding-bottom:.2em;",
        "h3": f"font-size:1.25em;margin:1em 0 .5em;font-weight:bold;color:{a};",
        "h4": "font-size:1.1em;margin:1em 0 .5em;font-weight:bold;",
        "h5": "font-size:1em;margin:1em 0 .5em;font-weight:bold;",
        "h6": "font-size:.95em;margin:1em 0 .5em;font-weight:bold;color:#666;",
        "p": "margin:.8em 0;",
        "a": f"color:{a};text-decoration:none;border-bottom:1px solid {a};",
        "strong": f"font-weight:bold;color:{a};",
        "em": "font-style:italic;",
        "del": "text-decoration:line-through;color:#888;",
        "blockquote": f"margin:1em 0;padding:.6em 1em;border-left:4px solid {a};background:#f7f7f7;color:#555;",
        "code": "font-family:Menlo,Consolas,monospace;font-size:.9em;background:#f3f3f3;padding:.1em .35em;border-radius:3px;color:#c7254e;",
        "pre": "margin:1em 0;padding:1em;background:#f6f8fa;border-radius:6px;overflow-x:auto;line-height:1.5;",
        "pre code": "background:none;padding:0;color:#333;font-size:.9em;",
        "ul": "margin:.8em 0;padding-left:1.6em;",
        "ol": "margin:.8em 0;padding-left:1.6em;",
        "li": "margin:.3em 0;",
        "table": "border-collapse:collapse;margin:1em 0;width:100%;",
        "th": f"border:1px solid #ddd;padding:.4em .8em;background:{a}1a;font-weight:bold;",
        "td": "border:1px solid #ddd;padding:.4em .8em;",
        "hr": f"border:none;border-top:1px solid {a}55;margin:1.5em 0;",
        "img": "max-width:100%;display:block;margin:1em auto;",
        "table.front-matter": "border-collapse:collapse;margin:0 0 1.5em;font-size:.9em;color:#666;",
    }


_STATIC: Final = Path(__file__).parent / "static"

_EXPORT_PAGE_CSS: Final = """:root{--sans:-apple-system,"Segoe UI",system-ui,"PingFang SC","Hiragino Sans","Noto Sans CJK SC",\
"Microsoft YaHei",sans-serif;--mono:"SFMono-Regular",Menlo,Consolas,"Noto Sans Mono CJK SC",monospace;\
--panel-2:#f0f2f5;--border:#dfe3e8;--text:#1f2328;--muted:#6a737d;--accent:#2f6feb;\
--accent-soft:rgba(47,111,235,.12);--ai-hl:rgba(255,196,0,.55);--error-text:#a4111c;--syn-link:#0969da;\
--syn-heading:#0b4fb3;--syn-code:#b3261e;--syn-mark:#8a6d00;--syn-keyword:#8250df;--syn-string:#0a7a4b;}
html{background:#fff;}
body{margin:0;}
.markdown-body{max-width:860px;margin:0 auto;padding:2em;box-sizing:border-box;}
.markdown-body .math.block{overflow-x:auto;margin:1em 0;text-align:center;}
/* A font with an OpenType MATH table, or a display integral or sum is drawn at text size: MathML Core stretches
   large operators only from such a font (https://w3c.github.io/mathml-core/#the-math-script-level-property). */
.markdown-body math{font-family:"Latin Modern Math","STIX Two Math","Cambria Math","DejaVu Math TeX Gyre",math;}
/* Printing (PDF): a heading stays with the text under it, and a figure, formula, code block, table row or
   task item is not split across pages (CSS Fragmentation Level 3, break-after/break-inside: avoid). */
.markdown-body h1,.markdown-body h2,.markdown-body h3,.markdown-body h4,.markdown-body h5,.markdown-body h6{\
break-after:avoid;page-break-after:avoid;break-inside:avoid;}
.markdown-body pre,.markdown-body .math.block,.markdown-body img,.markdown-body tr,.markdown-body li,\
.markdown-body blockquote{break-inside:avoid;page-break-inside:avoid;}
@media print{.markdown-body{max-width:none;padding:0;}}
"""
"""The exported page's frame: the light colour theme's variables that typography.css reads (the editor's
app.css defines them per colour theme; exports are always light, like paper) and the print rules."""


def export_css(typography: str | None = None) -> tuple[str, str]:
    """(CSS, theme key) of an exported page: the preview's own typography themes (`static/typography.css`,
    copied there from the bundle's source by the build) under the light colour theme, so an export looks like
    the preview in every theme, not only in its accent colour."""
    from deskbridge.kinds.markdown.ui_state import TYPOGRAPHIES

    key = typography if typography in TYPOGRAPHIES else "Simple"
    return _EXPORT_PAGE_CSS + _themes_css(), key


@lru_cache(maxsize=1)
def _themes_css() -> str:
    return (_STATIC / "typography.css").read_text("utf-8")


# --- HTML building blocks -------------------------------------------------------------------------------


def local_image_data_uri(src: str, base_dir: Path | None) -> str | None:
    """A data URI for a local image reference inside the document's folder, else None.

    Images outside the document's folder (`../`, absolute paths, symlinks out) are never read: an export
    must not carry other files of the person's disk, e.g. when an AI wrote the image reference.
    """
    if base_dir is None:
        return None
    parsed = urlparse(src)
    if parsed.scheme not in ("", "file") or not parsed.path:
        return None
    if parsed.netloc or "\\" in src:
        return None  # file://host/share or a UNC path: never reach out to another machine
    base = base_dir.resolve()
    candidate = (base / unquote(parsed.path)).resolve()
    if not candidate.is_relative_to(base):
        return None
    mime = mimetypes.guess_type(candidate.name)[0] or "application/octet-stream"
    if not mime.startswith("image/") or mime == "image/svg+xml":
        return None  # an SVG is a document of its own (scripts, external references): never inlined
    try:
        # a FIFO or device named like an image must not hang the export (core.files: O_NONBLOCK + S_ISREG)
        data = files.read_regular_file(candidate, max_bytes=IMAGE_MAX_BYTES, shown_as=src)
    except BridgeError:
        return None
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _inline_images(root: Any, base_dir: Path | None, *, keep_remote: bool = False) -> None:
    """Local images become data URIs. Anything else (remote, or a local file that cannot be read) is dropped
    with its alt text kept, so an exported file makes no request when opened; `keep_remote` keeps http(s)
    images (the rich-HTML copies, whose platforms fetch and re-host pictures themselves)."""
    for img in list(root.iter("img")):
        src = img.get("src") or ""
        if src.startswith("data:image/"):
            continue
        uri = local_image_data_uri(src, base_dir)
        if uri is not None:
            img.set("src", uri)
        elif keep_remote and re.match(r"^https?://", src, re.I):
            continue
        else:
            placeholder = lxml_html.Element("span", {"class": "image-not-embedded"})
            placeholder.text = img.get("alt") or ""
            placeholder.tail = img.tail
            img.getparent().replace(img, placeholder)


def _markdown_with_inlined_images(text: str, base_dir: Path | None) -> str:
    """The Markdown with local image destinations replaced by data URIs (pandoc runs sandboxed)."""
    from deskbridge.kinds.markdown.render import parser

    sources: set[str] = set()
    for token in parser(EXPORT).parse(text):
        for child in token.children or ():
            if child.type == "image":
                sources.add(str(child.attrGet("src") or ""))
    for src in sorted(sources, key=len, reverse=True):
        uri = local_image_data_uri(src, base_dir)
        if uri is not None:
            text = text.replace(f"]({src}", f"]({uri}").replace(f"]: {src}", f"]: {uri}")
    return text


def _math_to_mathml(root: Any) -> None:
    """KaTeX-ready math elements → MathML, so exports need no script."""
    try:
        from latex2mathml.converter import convert
    except ImportError:  # pragma: no cover - optional dependency; math stays as TeX text
        return
    for el in list(root.iter()):
        cls = el.get("class") or ""
        if el.tag not in ("span", "div") or "math" not in cls.split():
            continue
        tex = el.text_content()
        display = "block" if "block" in cls.split() else "inline"
        try:
            mathml = convert(tex, display=display)
        except Exception:  # a TeX construct latex2mathml does not know: keep the TeX visible
            continue
        new = lxml_html.fragment_fromstring(mathml, create_parent="span" if display == "inline" else "div")
        _harmless_mathml(new)
        new.set("class", cls)
        new.set("data-tex", tex)
        new.tail = el.tail
        el.getparent().replace(el, new)


_MATHML_DROP: Final = re.compile(r"href|^on|src$|^style$", re.I)


def _harmless_mathml(root: Any) -> None:
    """MathML from TeX keeps layout attributes only: `\\href{javascript:…}` becomes `<mrow href=…>` in
    latex2mathml, so link, event and style attributes are dropped (the corpus's `katex-href` vector)."""
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        for name in list(el.attrib):
            if _MATHML_DROP.search(name.split("}")[-1]):
                del el.attrib[name]


def _parse_fragment(fragment: str) -> Any:
    return lxml_html.fragment_fromstring(fragment or "<p></p>", create_parent="section")


def _serialize_children(root: Any) -> str:
    out = [html_lib.escape(root.text)] if root.text else []
    out.extend(lxml_html.tostring(child, encoding="unicode") for child in root)
    return "".join(out)


def body_html(text: str, base_dir: Path | None) -> str:
    """Rendered, self-contained body HTML (images inlined, math as MathML)."""
    root = _parse_fragment(render_html(text, EXPORT))
    _inline_images(root, base_dir)
    _math_to_mathml(root)
    return _serialize_children(root)


def export_html(text: str, *, title: str, base_dir: Path | None = None, typography: str | None = None) -> str:
    """A complete, self-contained HTML document (no external requests), styled like the preview."""
    css, key = export_css(typography)
    return (
        '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{EXPORT_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html_lib.escape(title)}</title>\n<style>\n{css}</style>\n</head>\n"
        f'<body>\n<article class="markdown-body preview" data-typo="{key}">\n{body_html(text, base_dir)}'
        "</article>\n</body>\n</html>\n"
    )


# --- rich HTML for social platforms --------------------------------------------------------------------

RICH_TARGETS: Final = ("wechat", "zhihu", "juejin")

_INHERIT: Final = "color:inherit;font-size:inherit;"
"""Style for elements the theme says nothing about."""


def rich_html(text: str, target: str, *, base_dir: Path | None = None, typography: str | None = None) -> str:
    """Inline-styled HTML for pasting into the WeChat / Zhihu / Juejin editor: a style on every element.

    What differs per platform (formulas, links) is in rich.py.
    """
    if target not in RICH_TARGETS:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT, f"target {target!r} is not one of {', '.join(RICH_TARGETS)}"
        )
    root = _parse_fragment(render_html(text, EXPORT))
    _inline_images(root, base_dir, keep_remote=True)
    from deskbridge.kinds.markdown.rich import adapt

    adapt(root, target)  # formulas and links in the form each platform's editor accepts (rich.py)
    styles = theme_styles(typography)
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        tag = el.tag
        style = styles.get(tag, "")
        if tag == "code" and el.getparent() is not None and el.getparent().tag == "pre":
            style = styles["pre code"]
        if tag == "table" and "front-matter" in (el.get("class") or ""):
            style = styles["table.front-matter"]
        if tag == "section":
            style = styles["section"]
        if tag == "img" and el.get("eeimg"):  # a platform's equation image sits in the line (rich.py)
            style = "display:inline-block;vertical-align:middle;margin:0 .1em;max-width:100%;"
        if tag != "math" and tag != "svg" and any(a.tag in ("math", "svg") for a in el.iterancestors()):
            continue  # inside a formula its own layout rules apply (font-size:inherit would flatten MathML)
        if not style:
            # the platforms' editors keep only inline styles, so every element carries one (research §1)
            style = _INHERIT
        if tag == "a" and not re.match(r"^(https?:|mailto:|#|/|\./|\.\./|[^:]*$)", el.get("href") or ""):
            el.attrib.pop("href", None)
        if style:
            el.set("style", (style + (el.get("style") or "")).strip())
        if tag == "li" and len(el) and el[0].tag == "input":
            el.set("style", el.get("style", "") + "list-style:none;")
        el.attrib.pop("class", None) if tag not in ("img", "math", "svg") else None
        el.attrib.pop("data-source-line", None)
    root.set("id", "deskbridge-markdown")
    return lxml_html.tostring(root, encoding="unicode")


# --- Word (pandoc) ------------------------------------------------------------------------------------


_HEADING_STYLES: Final = ("Title", *(f"Heading{n}" for n in range(1, 7)))


def _reference_docx(pypandoc: Any, accent: str, folder: Path) -> Path | None:
    """pandoc's own reference.docx with the headings in the theme's accent colour (`--reference-doc`, pandoc's
    manual: "the styles of the reference docx are used"); None when pandoc cannot hand out its default."""
    import io
    import subprocess
    import zipfile

    try:
        default = subprocess.run(
            [pypandoc.get_pandoc_path(), "--print-default-data-file", "reference.docx"],
            capture_output=True,
            timeout=30,
            check=True,
        ).stdout
        source = zipfile.ZipFile(io.BytesIO(default))
        styles = source.read("word/styles.xml").decode("utf-8")
    except (OSError, subprocess.SubprocessError, zipfile.BadZipFile, KeyError):
        return None
    colour = f'<w:color w:val="{accent.lstrip("#").upper()}" />'

    def recolour(match: re.Match[str]) -> str:
        style = re.sub(r"<w:color\b[^>]*/>", "", match.group(0))
        return style.replace("<w:rPr>", f"<w:rPr>{colour}", 1) if "<w:rPr>" in style else style

    ids = "|".join(_HEADING_STYLES)
    styles = re.sub(rf'<w:style [^>]*w:styleId="(?:{ids})".*?</w:style>', recolour, styles, flags=re.S)
    out = folder / "reference.docx"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            data = styles.encode("utf-8") if item.filename == "word/styles.xml" else source.read(item)
            target.writestr(item, data)
    files.publish_new(out, buffer.getvalue())
    return out


# pandoc's `yaml_metadata_block` reads a YAML block anywhere in the document: a `---` line at the start or after a
# blank line, not followed by a blank line, up to a `---` or `...` line (pandoc manual, "Extension:
# yaml_metadata_block").
_PANDOC_YAML_BLOCK: Final = re.compile(
    r"(?:\A|\n\n)---[ \t]*\n(?![ \t]*\n)(.*?)\n(?:---|\.\.\.)[ \t]*(?=\n|\Z)", re.S
)


def _refuse_yaml_aliases(text: str) -> None:
    """INVALID_ARGUMENT when a YAML block pandoc would read uses aliases: pandoc expands them (a few hundred bytes
    of nested aliases took it minutes and gigabytes), where the preview and HTML show such a block as written."""
    for block in _PANDOC_YAML_BLOCK.finditer(text):
        try:
            aliased = yaml_has_aliases(block.group(1))
        except Exception:  # not YAML: pandoc does not read it as metadata either
            continue
        if aliased:
            line = text.count("\n", 0, block.start(1))
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"the YAML block at line {line} uses aliases (*name), which the Word export does not expand; "
                "nothing was exported",
                hint="Write the values out in place of the aliases, or export HTML or PDF, which show the "
                "block as written.",
                data={"line": line},
            )


def export_docx(text: str, *, base_dir: Path | None = None, typography: str | None = None) -> bytes:
    """Word via pandoc (the `pypandoc-binary` wheel ships pandoc): tables, footnotes, math as Word equations."""
    _refuse_yaml_aliases(text)
    try:
        import pypandoc
    except ImportError:
        raise BridgeError(
            ErrorCode.NOT_FOUND,
            "Word export needs pandoc",
            hint="Install the export extra, `pip install 'deskbridge[export]'` (pipx: `pipx inject deskbridge "
            "pypandoc-binary playwright`), then retry md_ui_export_current_document; format html needs nothing.",
        ) from None
    with tempfile.TemporaryDirectory(prefix="deskbridge-docx-") as tmp:
        out = Path(tmp) / "out.docx"
        # Headings in the typography theme's accent colour, like the preview's (Word keeps its own fonts).
        reference = _reference_docx(pypandoc, theme_accent(typography), Path(tmp))
        extra = ["--standalone", *([f"--reference-doc={reference}"] if reference is not None else [])]
        try:
            # sandboxed pandoc reads no file but its input: local images go in as data URIs instead. The
            # document goes through pandoc's AST, where links, images and raw HTML pass the kind's URL rule.
            ast = json.loads(
                pypandoc.convert_text(
                    _markdown_with_inlined_images(text, base_dir),
                    "json",
                    format="gfm+tex_math_dollars+footnotes+yaml_metadata_block",
                    sandbox=True,
                )
            )
            pypandoc.convert_text(
                json.dumps(sanitize_pandoc_ast(ast)),
                "docx",
                format="json",
                outputfile=str(out),
                extra_args=extra,
                sandbox=True,
            )
        except (RuntimeError, OSError, ValueError) as exc:
            raise BridgeError(
                ErrorCode.INTERNAL, f"pandoc could not convert the document: {str(exc)[:300]}"
            ) from None
        return out.read_bytes()


def sanitize_pandoc_ast(node: Any) -> Any:
    """A pandoc JSON AST with what Word must not get removed, by the same URL rule as the HTML sanitiser:
    a link whose target is not http(s)/mailto/#/relative (`javascript:`, `file:`, UNC `\\\\host`) keeps its
    text but loses the link; an image that is not an inlined `data:image/…` keeps only its description; raw
    HTML/TeX blocks and inlines are dropped."""
    if isinstance(node, list):
        out = []
        for item in node:
            if isinstance(item, dict) and item.get("t") in ("RawInline", "RawBlock"):
                continue
            out.append(sanitize_pandoc_ast(item))
        return out
    if not isinstance(node, dict):
        return node
    kind = node.get("t")
    if kind in ("Link", "Image") and isinstance(node.get("c"), list) and len(node["c"]) == 3:
        attr, inlines, target = node["c"]
        url = target[0] if isinstance(target, list) and target else ""
        keep = (
            safe_url(url) is not None and not url.lower().startswith("data:")
            if kind == "Link"
            else bool(re.match(r"^data:image/", url or "", re.I))
        )
        if not keep:
            return {"t": "Span", "c": [attr, sanitize_pandoc_ast(inlines)]}
    return {k: sanitize_pandoc_ast(v) for k, v in node.items()}


# --- PDF / PNG (headless Chromium) ------------------------------------------------------------------------


def chromium_available() -> bool:
    return Path(CHROMIUM_PATH).is_file()


async def _with_page(page_html: str, action: Any) -> bytes:
    if not chromium_available():
        raise BridgeError(
            ErrorCode.NOT_FOUND,
            f"PDF and PNG export need Chromium at {CHROMIUM_PATH}, which is not installed",
            hint="Install Chromium (Debian/Ubuntu: `apt-get install chromium`) and the export extra, `pip install "
            "'deskbridge[export]'`, then retry md_ui_export_current_document; format html or docx needs no Chromium.",
        )
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        raise BridgeError(
            ErrorCode.NOT_FOUND,
            "PDF and PNG export need the Python package playwright",
            hint="Install the export extra, `pip install 'deskbridge[export]'` (it brings playwright, which drives "
            "the system Chromium), then retry md_ui_export_current_document; format html needs nothing.",
        ) from None
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM_PATH, args=list(CHROMIUM_ARGS))
        try:
            # A document is hostile: no JavaScript runs (so no WebSocket or fetch can even start), and nothing
            # may be fetched — the page is self-contained (its local images are data URIs), so every request
            # but a data: URL is refused.
            context = await browser.new_context(java_script_enabled=False, service_workers="block")
            page = await context.new_page()
            await page.route(
                "**/*",
                lambda route: (
                    route.abort() if not route.request.url.startswith("data:") else route.continue_()
                ),
            )
            await page.set_content(page_html, wait_until="load", timeout=CHROMIUM_TIMEOUT_MS)
            return await action(page)
        finally:
            await browser.close()


async def export_pdf(
    text: str, *, title: str, base_dir: Path | None = None, typography: str | None = None
) -> bytes:
    import anyio

    page_html = await anyio.to_thread.run_sync(
        lambda: export_html(text, title=title, base_dir=base_dir, typography=typography)
    )

    async def pdf(page: Any) -> bytes:
        return await page.pdf(
            format="A4",
            print_background=True,
            display_header_footer=True,
            header_template=f"<div style='font-size:8px;width:100%;text-align:center'>"
            f"{html_lib.escape(title)}</div>",
            footer_template="<div style='font-size:8px;width:100%;text-align:center'>"
            "<span class='pageNumber'></span> / <span class='totalPages'></span></div>",
            margin={"top": "18mm", "bottom": "18mm", "left": "15mm", "right": "15mm"},
        )

    return await _with_page(page_html, pdf)


async def export_png(
    text: str, *, title: str, base_dir: Path | None = None, typography: str | None = None
) -> bytes:
    import anyio

    page_html = await anyio.to_thread.run_sync(
        lambda: export_html(text, title=title, base_dir=base_dir, typography=typography)
    )

    async def shot(page: Any) -> bytes:
        await page.set_viewport_size({"width": 900, "height": 800})
        return await page.screenshot(full_page=True, type="png")

    return await _with_page(page_html, shot)


class ExportGate:
    """One export at a time per workspace, with a short bounded queue (issue 8 "export amplification": a
    document with N images pointing at the export route must not start N browsers)."""

    def __init__(self, queued_max: int = EXPORTS_QUEUED_MAX) -> None:
        self._lock = asyncio.Lock()
        self._waiting = 0
        self.queued_max = queued_max

    async def run(self, work: Any) -> Any:
        if self._lock.locked() and self._waiting >= self.queued_max:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED,
                f"an export is running and {self._waiting} more are waiting; try again when they are done",
                data={"queued": self._waiting, "limit": self.queued_max},
            )
        self._waiting += 1
        try:
            await self._lock.acquire()
        finally:
            self._waiting -= 1
        try:
            return await work()
        finally:
            self._lock.release()


def export_gate(service: Any) -> ExportGate:
    """The workspace's export gate (made on first use)."""
    gate = getattr(service, "_export_gate", None)
    if gate is None:
        gate = ExportGate()
        service._export_gate = gate
    return gate


async def export_bytes(
    fmt: str, text: str, *, title: str, base_dir: Path | None, typography: str | None = None
) -> bytes:
    """The exported file's bytes in `fmt` (HTML, PDF, PNG, Word). Callers go through `export_gate`."""
    import anyio

    if fmt == "HTML":
        page = await anyio.to_thread.run_sync(
            lambda: export_html(text, title=title, base_dir=base_dir, typography=typography)
        )
        return page.encode("utf-8")
    if fmt == "PDF":
        return await export_pdf(text, title=title, base_dir=base_dir, typography=typography)
    if fmt == "PNG":
        return await export_png(text, title=title, base_dir=base_dir, typography=typography)
    if fmt == "Word":
        return await anyio.to_thread.run_sync(
            lambda: export_docx(text, base_dir=base_dir, typography=typography)
        )
    raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"format {fmt!r} is not one of {', '.join(FORMATS)}")


# --- MCP-facing operations -----------------------------------------------------------------------------


def _typography(service: MarkdownService) -> str | None:
    ui = service.ui_state
    snap = getattr(ui, "snapshot", None)
    if callable(snap):
        value = snap().get("typography")
        return value if isinstance(value, str) else None
    return None


def export_target(
    service: MarkdownService, doc_id: str | None, fmt: str, file_name: str | None
) -> tuple[MarkdownDocument, Path, str, str]:
    """`(document, folder, stem, extension)` of an export: the document's folder (in scope), its name's stem
    or `file_name`; INVALID_ARGUMENT for an unknown format or a file name with folders."""
    doc = service.get(doc_id)
    ext = FORMATS.get(fmt)
    if ext is None:
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    folder = doc.path.parent if doc.path is not None else service.workspace.allowed_root
    stem = Path(doc.name).stem
    if file_name:
        if "/" in file_name or "\\" in file_name or file_name in (".", ".."):
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "fileName must be a plain file name (no folders)")
        stem = Path(file_name).stem if Path(file_name).suffix.lower() == ext else file_name
    from deskbridge.core.paths import resolve_path

    folder = (
        resolve_path(str(folder), [service.workspace.allowed_root])
        if service.workspace.scope.value != "CurrentDocument"
        else folder
    )
    return doc, folder, stem, ext


def export_question(
    service: MarkdownService, doc_id: str | None, fmt: str, file_name: str | None
) -> ApprovalText:
    """`md_ui_export_current_document`'s approval question (`ToolSpec.operation` "export"), asked centrally by
    `App.invoke`; a call that cannot succeed (unknown format, bad name) raises here, unasked."""
    doc, folder, stem, ext = export_target(service, doc_id, fmt, file_name)
    return ApprovalText(
        f"export {doc.name} as {fmt} into {folder.name or folder}",
        target=service.workspace.relative(folder / f"{stem}{ext}"),
    )


async def export_to_workspace(
    service: MarkdownService,
    doc_id: str | None,
    fmt: str,
    file_name: str | None,
    *,
    ctx: CallContext,
    tool: str,
) -> dict[str, Any]:
    """Export into the document's folder under a free name (no-overwrite publish). An AI caller's export was
    approved by the person before this runs (`App.invoke`, from the tool's operation and `export_question`)."""
    doc, folder, stem, ext = export_target(service, doc_id, fmt, file_name)
    text = doc.text
    data = await export_gate(service).run(
        lambda: export_bytes(
            fmt,
            text,
            title=stem,
            base_dir=doc.path.parent if doc.path else None,
            typography=_typography(service),
        )
    )
    for n in range(0, 1000):
        candidate = folder / (f"{stem}{ext}" if n == 0 else f"{stem}-{n}{ext}")
        try:
            files.publish_new(candidate, data)
        except BridgeError as exc:
            if exc.code is ErrorCode.TARGET_EXISTS:
                continue
            raise
        service.publish(
            "doc",
            {
                "type": "exported",
                "docId": doc.doc_id,
                "format": fmt,
                "path": service.workspace.relative(candidate),
            },
        )
        return {
            "docId": doc.doc_id,
            "format": fmt,
            "path": service.workspace.relative(candidate),
            "bytes": len(data),
        }
    raise BridgeError(ErrorCode.TARGET_EXISTS, f"no free file name for {stem}{ext} in {folder}")


def _editor_page_or_refuse(service: MarkdownService) -> None:
    if getattr(service.approvals.broker, "ui_attached", True) is False:
        # only the editor page can write the person's clipboard; without one the copy would go nowhere
        raise BridgeError(
            ErrorCode.UI_NOT_READY,
            "no editor page is open to put the rich HTML on the clipboard",
            hint="Ask the person to open the deskbridge editor in the browser, then retry.",
        )


def copy_question(service: MarkdownService, doc_id: str | None, target: str) -> ApprovalText:
    """`md_ui_copy_rendered_html`'s approval question (`ToolSpec.operation` "copy_rich_html"); without an
    editor page to write the clipboard the call is refused here, before anyone is asked."""
    doc = service.get(doc_id)
    _editor_page_or_refuse(service)
    return ApprovalText(f"copy {doc.name} as rich HTML for {target} to the clipboard", target=doc.name)


async def copy_rich_html(
    service: MarkdownService, doc_id: str | None, target: str, *, ctx: CallContext, tool: str
) -> dict[str, Any]:
    """Hand platform-styled HTML to the editor, which writes it to the clipboard (an AI caller's copy was
    approved before this runs: `App.invoke`, from the tool's operation and `copy_question`)."""
    doc = service.get(doc_id)
    _editor_page_or_refuse(service)
    html = rich_html(
        doc.text, target, base_dir=doc.path.parent if doc.path else None, typography=_typography(service)
    )
    plain = doc.text
    service.publish(
        "ui",
        {
            "type": "clipboard",
            "format": "rich-html",
            "target": target,
            "docId": doc.doc_id,
            "html": html,
            "text": plain,
        },
    )
    return {
        "docId": doc.doc_id,
        "target": target,
        "bytes": len(html.encode("utf-8")),
        "deliveredToEditor": True,
    }
