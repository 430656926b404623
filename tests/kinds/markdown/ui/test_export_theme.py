"""Exports follow the chosen typography theme (the preview's own CSS, not only its accent colour); a PDF keeps
each heading on the page of the text under it and draws display math at display size; Word keeps task-list
state. Each export is fetched from the real server the way the editor's Export menu does (POST with the
editor's intent header), after the typography was chosen through the UI-state route."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import httpx2
import pytest

from deskbridge.kinds.markdown import export

from .harness import make_bench, served

pytestmark = pytest.mark.anyio

MD = "/api/markdown"
INTENT = {"x-deskbridge-request": "export"}
CHROMIUM = Path(export.CHROMIUM_PATH)
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="Chromium is not at /usr/bin/chromium")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def bench(tmp_path: Path):
    return make_bench(tmp_path / "notes", require_approval=False)


@pytest.fixture
async def http(bench):
    async with (
        served(bench),
        httpx2.AsyncClient(base_url=bench.url, headers=bench.ui_headers(), timeout=120) as client,
    ):
        yield client


async def export_current(http, bench, fmt: str, text: str | None = None, typography: str = "Simple") -> bytes:
    """Choose the typography, open the document (a new file with `text`, else notes.md) and export it."""
    name = "notes.md"
    if text is not None:
        name = f"export-{fmt}.md"
        (bench.root / name).write_text(text, encoding="utf-8")
    r = await http.post(f"{MD}/ui", json={"typography": typography})
    assert r.status_code == 200, r.text
    opened = (await http.post(f"{MD}/open", json={"path": name})).json()
    r = await http.post(f"{MD}/docs/{opened['docId']}/export", json={"format": fmt}, headers=INTENT)
    assert r.status_code == 200, r.text
    return r.content


async def computed(page_html: str, script: str):
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=list(export.CHROMIUM_ARGS))
        try:
            page = await browser.new_page()
            await page.set_content(page_html)
            return await page.evaluate(script)
        finally:
            await browser.close()


HEADING_LOOK = """() => { const s = getComputedStyle(document.querySelector('h2'));
  return [s.backgroundColor, s.color, s.borderRadius, getComputedStyle(document.querySelector('h1')).textAlign]; }"""


@needs_chromium
async def test_html_export_is_styled_by_the_previews_typography_theme(http, bench):
    orange = (await export_current(http, bench, "html", typography="OrangeHeart")).decode("utf-8")
    assert 'data-typo="OrangeHeart"' in orange
    # The same rules as the preview (static/typography.css, copied from the bundle's source by the build).
    themes = (Path(export.__file__).parent / "static" / "typography.css").read_text("utf-8")
    assert themes in orange
    simple = (await export_current(http, bench, "html", typography="Simple")).decode("utf-8")
    # Orange Heart's h2 is a white-on-orange pill and its h1 is centred; Simple's are plain with an accent bar.
    assert await computed(orange, HEADING_LOOK) == [
        "rgb(232, 100, 27)",
        "rgb(255, 255, 255)",
        "999px",
        "center",
    ]
    assert (await computed(simple, HEADING_LOOK))[:2] == ["rgba(0, 0, 0, 0)", "rgb(31, 35, 40)"]


@needs_chromium
async def test_display_math_is_drawn_at_display_size(http, bench):
    text = "Inline $\\int_0^1 x^2\\,dx$ in a line.\n\n$$\n\\int_0^1 x^2\\,dx\n$$\n"
    page = (await export_current(http, bench, "html", text)).decode("utf-8")
    heights = await computed(
        page,
        "() => [...document.querySelectorAll('math')].map(m => "
        "[m.getAttribute('display'), m.querySelector('mo').getBoundingClientRect().height])",
    )
    (inline_kind, inline_h), (block_kind, block_h) = heights
    assert (inline_kind, block_kind) == ("inline", "block")
    # A display integral is a large operator (MathML Core draws it from a MATH-table font); at text size it
    # would be as tall as the inline one.
    assert block_h >= 1.25 * inline_h, heights


@needs_chromium
async def test_pdf_keeps_every_heading_on_the_page_of_its_text(http, bench):
    pypdf = pytest.importorskip("pypdf")
    parts = ["# Keeping headings with their text\n"]
    for n in range(1, 121):
        # paragraphs of changing length, so that headings land at the foot of many of the ~25 pages
        parts.append("Filler sentence for the page. " * (2 + (n * 7) % 23) + "\n")
        parts.append(f"## Heading number {n}\n\nBodytext{n} follows its heading.\n")
    pdf = await export_current(http, bench, "pdf", "\n".join(parts))
    pages = [page.extract_text() for page in pypdf.PdfReader(io.BytesIO(pdf)).pages]
    assert len(pages) >= 10
    for n in range(1, 121):
        where = [i for i, t in enumerate(pages) if re.search(rf"Heading number {n}\b", t)]
        body = [i for i, t in enumerate(pages) if f"Bodytext{n} " in t]
        assert where and where == body, f"heading {n} on page {where}, its text on {body}"


async def test_word_export_keeps_task_list_state(http, bench):
    text = "# Tasks\n\n- [x] written\n- [ ] reviewed\n- [x] 已发布\n"
    docx = zipfile.ZipFile(io.BytesIO(await export_current(http, bench, "docx", text)))
    document = docx.read("word/document.xml").decode("utf-8")
    numbering = docx.read("word/numbering.xml").decode("utf-8")
    # pandoc writes a task item as a list item whose bullet is ☒ (done) or ☐ (open)
    abstract = {
        m.group(1): re.search(r'lvlText w:val="([^"]*)"', m.group(0)).group(1)
        for m in re.finditer(r'<w:abstractNum w:abstractNumId="(\d+)".*?</w:abstractNum>', numbering, re.S)
    }
    num = dict(re.findall(r'<w:num w:numId="(\d+)"><w:abstractNumId w:val="(\d+)"', numbering))
    bullets = {}
    for para in re.findall(r"<w:p>.*?</w:p>", document, re.S):
        item = re.search(r'<w:numId w:val="(\d+)"', para)
        words = "".join(re.findall(r"<w:t[^>]*>([^<]*)</w:t>", para)).strip()
        if item:
            bullets[words] = abstract[num[item.group(1)]]
    assert bullets == {"written": "☒", "reviewed": "☐", "已发布": "☒"}


async def test_word_headings_take_the_typography_themes_accent(http, bench):
    def heading_colours(docx: bytes) -> set[str]:
        styles = zipfile.ZipFile(io.BytesIO(docx)).read("word/styles.xml").decode("utf-8")
        found = set()
        for sid in ("Heading1", "Heading2", "Heading3"):
            style = re.search(rf'<w:style [^>]*w:styleId="{sid}".*?</w:style>', styles, re.S).group(0)
            found |= set(re.findall(r'<w:color w:val="([0-9A-F]{6})"', style))
        return found

    text = "# Title\n\n## Section\n\nBody.\n"
    # the accent of each theme in the preview's stylesheet (typography.css --t-accent)
    assert heading_colours(await export_current(http, bench, "docx", text, typography="OrangeHeart")) == {
        "E8641B"
    }
    assert heading_colours(await export_current(http, bench, "docx", text, typography="GeekBlack")) == {
        "10B981"
    }
