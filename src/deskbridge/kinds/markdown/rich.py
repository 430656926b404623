"""What each platform's editor gets from "Copy for WeChat / Zhihu / Juejin" where their editors differ.

`export.rich_html` renders the document once, inlines the typography theme's styles on every element (all
three editors keep inline styles only) and then calls `adapt(root, target)` here for what differs:

* **Zhihu** re-renders a formula from its own equation image: `<img src="https://www.zhihu.com/equation?tex=…"
  alt="TeX" class="ee_img tr_noresize" eeimg="1">`, the TeX URL-encoded, on one line, with a trailing `\\\\`
  for a centred display formula (the format md2zhihu writes for Zhihu's editor,
  https://github.com/drmingdrmer/md2zhihu, `md2zhihu/mistune_renderer`/`convert.py`: `tex_to_zhihu`). Its
  editor keeps outside links.
* **WeChat** (the 公众号 editor) keeps neither MathML nor scripts, but keeps inline SVG: formulas become SVG
  paths (ziamath, pure Python with the STIX Two Math font; what mdnice does with MathJax SVG). Its articles may
  link only to other WeChat articles, so every other link becomes numbered text with the address listed under
  "References" at the end (the "微信外链转底部引用" option of doocs/md, https://github.com/doocs/md).
* **Juejin** keeps outside links; its editor re-renders formulas from Juejin's own equation images
  (`https://juejin.cn/equation?tex=…`, the form mdnice's converter writes, formerly on juejin.im).

The platform images are addresses on the platform itself: nothing is fetched by deskbridge, and the person's
paste is what makes the platform draw them.
"""

from __future__ import annotations

import re
from typing import Any, Final
from urllib.parse import quote, urlparse

from lxml import etree
from lxml import html as lxml_html

ZHIHU_EQUATION: Final = "https://www.zhihu.com/equation?tex="
JUEJIN_EQUATION: Final = "https://juejin.cn/equation?tex="
WECHAT_LINK_HOSTS: Final = ("mp.weixin.qq.com",)
"""Links WeChat articles may keep; every other outside link goes to the references list."""


FORMULA_SVG_TAGS: Final = frozenset({"svg", "g", "path", "rect", "line"})
FORMULA_SVG_ATTRS: Final = frozenset(
    {
        "xmlns",
        "width",
        "height",
        "viewbox",
        "d",
        "fill",
        "stroke",
        "stroke-width",
        "x",
        "y",
        "x1",
        "y1",
        "x2",
        "y2",
    }
)
"""What a formula's SVG may contain (`viewbox` is how the HTML parser stores viewBox; a browser's HTML parser
restores its case, https://html.spec.whatwg.org/#adjust-svg-attributes)."""


def _math_elements(root: Any) -> list[tuple[Any, str, bool]]:
    """(element, TeX, display?) for every formula the renderer marked (`span.math.inline`, `div.math.block`)."""
    found = []
    for el in root.iter():
        if not isinstance(el.tag, str) or el.tag not in ("span", "div"):
            continue
        cls = (el.get("class") or "").split()
        if "math" in cls:
            found.append((el, el.get("data-tex") or el.text_content(), "block" in cls))
    return found


def _replace(el: Any, new: Any) -> None:
    new.tail = el.tail
    el.getparent().replace(el, new)


def equation_image(base: str, tex: str, block: bool, *, centre_mark: bool = False) -> Any:
    """A platform's equation image for `tex` (Zhihu and Juejin share the form; see the module docstring)."""
    # One line: a newline ends the TeX in the platform's URL; `>` in alt confuses Zhihu's editor (md2zhihu).
    tex = re.sub(r"\s*\n\s*", " ", tex).strip().replace(">", "\\gt ")
    # Zhihu centres a display formula whose TeX ends in \\ (md2zhihu); Juejin has no such mark.
    shown = tex + ("\\\\" if block and centre_mark else "")
    return lxml_html.Element(
        "img",
        {"src": base + quote(shown, safe=""), "alt": shown, "class": "ee_img tr_noresize", "eeimg": "1"},
    )


def _svg_formula(tex: str, block: bool) -> Any | None:
    """The formula as SVG paths, or None when ziamath is missing or cannot typeset it (MathML then)."""
    try:
        import ziamath
    except ImportError:  # pragma: no cover - a dependency; keep the MathML if it is absent
        return None
    ziamath.config.svg2 = False  # plain <path>s, no <symbol>/<use> (editors drop references)
    try:
        svg = ziamath.Latex(tex.strip(), size=16 if not block else 18, inline=not block).svg()
    except Exception:
        return None
    element = lxml_html.fragment_fromstring(svg)
    # Only geometry leaves here: an allow-list of elements and attributes (an SVG can carry scripts, links and
    # foreign HTML; none of those can come out of a typesetter, and if anything else did, MathML is used).
    for el in element.iter():
        if not isinstance(el.tag, str) or el.tag not in FORMULA_SVG_TAGS:
            return None
        for name in list(el.attrib):
            if name not in FORMULA_SVG_ATTRS:
                del el.attrib[name]
    element.set("style", "vertical-align:middle;max-width:100%;" if not block else "max-width:100%;")
    if not block:
        return element
    wrapper = lxml_html.Element("section", {"style": "text-align:center;margin:1em 0;overflow-x:auto;"})
    wrapper.append(element)
    return wrapper


def _links_to_references(root: Any) -> None:
    """WeChat: outside links become "text[n]" with the addresses listed at the end."""
    references: list[str] = []
    for a in list(root.iter("a")):
        href = a.get("href") or ""
        parsed = urlparse(href)
        if parsed.scheme not in ("http", "https") or parsed.hostname in WECHAT_LINK_HOSTS:
            continue
        if href not in references:
            references.append(href)
        number = references.index(href) + 1
        span = lxml_html.Element("span")
        span.text = a.text
        for child in a:
            span.append(child)
        sup = lxml_html.Element("sup")
        sup.text = f"[{number}]"
        span.append(sup)
        _replace(a, span)
    if not references:
        return
    section = lxml_html.Element("section", {"class": "references"})
    title = etree.SubElement(section, "p")
    strong = etree.SubElement(title, "strong")
    strong.text = "References"
    for number, href in enumerate(references, 1):
        line = etree.SubElement(section, "p")
        line.text = f"[{number}] {href}"
    root.append(section)


def adapt(root: Any, target: str) -> None:
    """Change the rendered document (before styles are inlined) for `target`'s editor."""
    from deskbridge.kinds.markdown.export import _math_to_mathml

    if target in ("zhihu", "juejin"):
        base = ZHIHU_EQUATION if target == "zhihu" else JUEJIN_EQUATION
        for el, tex, block in _math_elements(root):
            image = equation_image(base, tex, block, centre_mark=target == "zhihu")
            if block:  # a display formula is a paragraph of its own, centred
                holder = lxml_html.Element("p", {"style": "text-align:center;"})
                holder.append(image)
                image = holder
            _replace(el, image)
        return
    if target == "wechat":
        for el, tex, block in _math_elements(root):
            svg = _svg_formula(tex, block)
            if svg is not None:
                _replace(el, svg)
        _math_to_mathml(root)  # anything ziamath could not typeset stays readable as MathML
        _links_to_references(root)
