"""Exports as a writer uses them on the sample notes: self-contained HTML, rich HTML, Word, PDF/PNG."""

from __future__ import annotations

import asyncio
import importlib.util
import io
import zipfile
from pathlib import Path

import pytest
from lxml import html as lxml_html

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.tools import CallContext
from deskbridge.kinds.markdown import export
from deskbridge.kinds.markdown.demo import make_sample_notes
from deskbridge.kinds.markdown.service import MarkdownService
from deskbridge.kinds.markdown.tools import markdown_tools

from .central import approved_run

AI = CallContext(caller="mcp:s", client_name="Claude")


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return make_sample_notes(tmp_path / "notes")


def test_html_export_is_self_contained(notes):
    text = (notes / "README.md").read_text(encoding="utf-8")
    page = export.export_html(text, title="Project notes", base_dir=notes)
    tree = lxml_html.fromstring(page)
    assert tree.xpath("//img/@src")[0].startswith("data:image/png;base64,")
    assert tree.xpath("//style") and not tree.xpath("//link|//script")
    assert tree.xpath("//table[@class='front-matter']//th/text()") == ["title", "tags", "updated"]
    assert "<math" in page  # math converted to MathML, no script needed


def test_images_outside_the_document_folder_are_not_inlined(tmp_path):
    (tmp_path / "secret.png").write_bytes(b"\x89PNG....")
    (tmp_path / "doc").mkdir()
    page = export.export_html("![x](../secret.png)", title="t", base_dir=tmp_path / "doc")
    assert "data:image" not in page and "secret.png" not in page


@pytest.mark.parametrize("target", export.RICH_TARGETS)
def test_rich_html_has_an_inline_style_on_every_element(notes, target):
    text = (notes / "README.md").read_text(encoding="utf-8")
    root = lxml_html.fromstring(export.rich_html(text, target, base_dir=notes))
    for el in root.iter():
        if isinstance(el.tag, str) and not any(a.tag in ("math", "svg") for a in el.iterancestors()):
            assert el.get("style"), f"<{el.tag}> without inline style for {target}"
    assert not root.xpath("//style|//script|//*[@class='task-list-item']")
    if target == "zhihu":
        assert root.xpath("//img[@eeimg='1']/@alt")  # Zhihu's equation images (rich.py)


@pytest.mark.skipif(importlib.util.find_spec("pypandoc") is None, reason="pypandoc-binary is not installed")
def test_word_export_has_native_equations(notes):
    data = export.export_docx((notes / "README.md").read_text(encoding="utf-8"), base_dir=notes)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        xml = z.read("word/document.xml").decode()
        media = [name for name in z.namelist() if name.startswith("word/media/")]
    assert "<m:oMath" in xml and "Project notes" in xml
    assert media  # the local image is embedded (pandoc itself reads no files: it runs sandboxed)


@pytest.mark.skipif(importlib.util.find_spec("pypandoc") is None, reason="pypandoc-binary is not installed")
def test_word_export_refuses_yaml_aliases_pandoc_would_expand(notes):
    """pandoc reads a YAML block anywhere and expands its aliases: 6 levels of 9 took it 14 s and 29 MB, every
    further level nine times more. Such a document is refused at once, saying where; others export as before."""
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip("abcd", "bcde", strict=True):
        lines.append(f"{name}: &{name} [" + ", ".join(f"*{prev}" for _ in range(9)) + "]")
    text = "# Notes\n\nSome text.\n\n---\n" + "\n".join(lines) + "\n...\n\nMore text.\n"
    with pytest.raises(BridgeError) as err:
        export.export_docx(text)
    assert err.value.code is ErrorCode.INVALID_ARGUMENT and err.value.data == {"line": 5}
    assert "HTML" in err.value.hint
    front = "---\ntitle: Plain\ntags: [a, b]\n---\n\n# Notes\n\n---\n\nafter a rule\n"
    with zipfile.ZipFile(io.BytesIO(export.export_docx(front))) as z:
        assert "after a rule" in z.read("word/document.xml").decode()


def test_pdf_without_chromium_names_what_to_install(monkeypatch):
    monkeypatch.setattr(export, "CHROMIUM_PATH", "/nonexistent/chromium")
    with pytest.raises(BridgeError) as err:
        asyncio.run(export.export_pdf("# x", title="x"))
    assert "apt-get install chromium" in err.value.hint


@pytest.mark.skipif(not export.chromium_available(), reason="Chromium is not installed at /usr/bin/chromium")
def test_pdf_and_png_with_chromium(notes):
    text = (notes / "README.md").read_text(encoding="utf-8")
    assert asyncio.run(export.export_pdf(text, title="n", base_dir=notes)).startswith(b"%PDF")
    assert asyncio.run(export.export_png(text, title="n", base_dir=notes)).startswith(b"\x89PNG")


def test_mcp_export_publishes_next_to_the_document_without_overwriting(notes):
    service = MarkdownService(notes, approval_settings={"overrides": {"export": False}})
    asyncio.run(service.open("README.md"))
    tool = {s.name: s for s in markdown_tools(service)}["md_ui_export_current_document"]
    run = lambda: asyncio.run(tool.handler(AI, tool.args.model_validate({"format": "HTML"})))  # noqa: E731
    first, second = run(), run()
    assert (first["path"], second["path"]) == ("README.html", "README-1.html")
    assert (notes / "README.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_copy_rich_html_needs_approval_and_goes_to_the_editor(notes):
    events = []
    service = MarkdownService(notes / "ideas.md", events=lambda topic, data: events.append((topic, data)))
    tool = {s.name: s for s in markdown_tools(service)}["md_ui_copy_rendered_html"]
    args = tool.args.model_validate({"target": "wechat"})
    with pytest.raises(BridgeError) as err:  # asked centrally (as App.invoke does): no channel, declined
        asyncio.run(approved_run(service, tool, AI, args))
    assert err.value.code is ErrorCode.APPROVAL_DECLINED
    assert not [d for t, d in events if t == "ui" and d.get("type") == "clipboard"]
    service.approvals.rules.enabled = False
    asyncio.run(approved_run(service, tool, AI, args))
    clip = [d for t, d in events if t == "ui" and d.get("type") == "clipboard"]
    assert clip and "style=" in clip[0]["html"]


def test_copy_rich_html_without_an_editor_page_says_so(notes):
    from deskbridge.core.events import EventBus
    from deskbridge.core.policy import ApprovalBroker

    service = MarkdownService(notes / "ideas.md", policy=ApprovalBroker(EventBus()))
    tool = {s.name: s for s in markdown_tools(service)}["md_ui_copy_rendered_html"]
    with pytest.raises(BridgeError) as err:
        asyncio.run(tool.handler(AI, tool.args.model_validate({"target": "zhihu"})))
    assert err.value.code is ErrorCode.UI_NOT_READY
