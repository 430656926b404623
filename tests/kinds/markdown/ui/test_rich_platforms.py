""" "Copy for WeChat / Zhihu / Juejin" gives each editor what it accepts (kinds/markdown/rich.py), fetched from the
real server as the editor's copy command does (GET /api/markdown/docs/{id}/rich)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import httpx2
import pytest
from lxml import html as lxml_html

from .harness import make_bench, served

pytestmark = pytest.mark.anyio

MD = "/api/markdown"
TEXT = """# Formulas and links

Euler: $e^{i\\pi} + 1 = 0$, see [the site](https://example.com/euler) and [an article](https://mp.weixin.qq.com/s/abc).

$$
\\int_0^1 x^2\\,dx > 0
$$
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def bench(tmp_path: Path):
    return make_bench(tmp_path / "notes", text=TEXT, require_approval=False)


@pytest.fixture
async def rich(bench):
    async with served(bench), httpx2.AsyncClient(base_url=bench.url, headers=bench.ui_headers()) as http:
        docs = (await http.get(f"{MD}/docs")).json()
        doc = docs["current"]

        async def get(target: str) -> str:
            r = await http.get(f"{MD}/docs/{doc}/rich", params={"target": target})
            assert r.status_code == 200, r.text
            return r.json()["html"]

        yield get


async def test_zhihu_gets_its_equation_images_with_the_tex(rich):
    root = lxml_html.fragment_fromstring(await rich("zhihu"))
    images = root.findall(".//img")
    assert [img.get("eeimg") for img in images] == ["1", "1"]
    inline, block = images
    assert inline.get("src") == "https://www.zhihu.com/equation?tex=" + "e%5E%7Bi%5Cpi%7D%20%2B%201%20%3D%200"
    assert inline.get("alt") == "e^{i\\pi} + 1 = 0" and "ee_img" in inline.get("class")
    # a display formula: one line, `>` as \gt, and the trailing \\ that centres it in Zhihu
    assert unquote(block.get("src").split("tex=", 1)[1]) == "\\int_0^1 x^2\\,dx \\gt  0\\\\"
    assert all(img.get("src") for img in images)  # never the old empty <img src="">
    assert root.find(".//a[@href='https://example.com/euler']") is not None  # Zhihu keeps outside links


async def test_wechat_gets_svg_formulas_and_outside_links_as_references(rich):
    page = await rich("wechat")
    root = lxml_html.fragment_fromstring(page)
    svgs = root.findall(".//svg")
    assert len(svgs) == 2 and all(svg.find(".//path") is not None for svg in svgs)
    assert "<math" not in page and "<img" not in page and "equation?tex" not in page
    assert root.find(".//a[@href='https://example.com/euler']") is None  # WeChat would drop it
    assert root.find(".//a[@href='https://mp.weixin.qq.com/s/abc']") is not None  # allowed: a WeChat article
    assert "the site[1]" in root.text_content()
    assert "[1] https://example.com/euler" in root.text_content()
    for el in root.iter():  # nothing from the formula renderer may carry a link or a handler
        assert not any(name.startswith("on") or "href" in name for name in el.attrib if el.tag != "a")


async def test_juejin_gets_its_equation_images_and_keeps_links(rich):
    page = await rich("juejin")
    root = lxml_html.fragment_fromstring(page)
    srcs = [img.get("src") for img in root.findall(".//img")]
    assert len(srcs) == 2 and all(s.startswith("https://juejin.cn/equation?tex=") for s in srcs)
    assert not unquote(srcs[1]).endswith("\\\\")  # Zhihu's centring mark is Zhihu's own
    assert root.find(".//a[@href='https://example.com/euler']") is not None


async def test_the_three_platforms_no_longer_get_the_same_bytes(rich):
    pages = {target: await rich(target) for target in ("wechat", "zhihu", "juejin")}
    assert len(set(pages.values())) == 3


async def test_rich_html_takes_the_typography_themes_accent(rich, bench):
    bench.ui_state.set_typography("OrangeHeart", source="ui")
    root = lxml_html.fragment_fromstring(await rich("zhihu"))
    # the preview's Orange Heart accent (typography.css), not a second palette
    assert "color:#e8641b" in root.find(".//h1").get("style")
