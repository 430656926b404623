"""Annotations in the PVF viewer served by the real `deskbridge serve`, in Chromium: hover a token for its
annotation, enum labels and reference names inline, a reference opens the target file, the `.equ` item card,
the rules panel (search in any language, detail with examples), and the UI language switch.

Chromium comes from the `browser` / `new_page` fixtures in tests/e2e/conftest.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbridge.kinds.pvf.synth import synth
from deskbridge.kinds.pvf.synth.content import GAME_HANT
from deskbridge.testing import ServerThread

SWORD = "equipment/annotated/swordman_sword.equ"

pytestmark = pytest.mark.browser


RULE = """{
  "format": "deskbridge-pvf-annotations",
  "version": 1,
  "rules": [{"id": "mine.rarity", "match": {"extensions": [".equ"]},
             "target": {"kind": "token", "section": "rarity", "index": 0},
             "annotation": {"title": "Mine", "type": "enum", "values": {"4": "Gold"}}}]
}
"""


def test_hover_hints_links_item_card_and_rules_panel(new_page, tmp_path: Path, deskbridge_home: Path) -> None:
    archive = tmp_path / "Script.pvf"
    synth(archive, family="classic", files=200, seed=4, annotated=True)
    with ServerThread(archive) as served:
        srv = served.srv
        page = new_page(viewport={"width": 1500, "height": 900}, locale="zh-CN")
        errors = page.errors
        page.goto(srv.login_url())
        page.wait_for_selector("body[data-ready='1']")
        assert page.input_value("#ann-lang") == "zh-CN"  # from the browser's language
        page.fill("#search", "swordman_sword")
        page.click("#tree-rows .row.file[title$='swordman_sword.equ']")  # the search's row, not the root's
        page.wait_for_selector(f"body[data-annotated='{SWORD}']")
        # inline hints: the enum label after [rarity]'s 4, the skill name after the level-up id
        rarity = page.locator("#viewer .ann[data-rule='equ.rarity']")
        assert rarity.text_content() == "4"
        hints = page.locator("#viewer .ann-hint").all_text_contents()
        assert "史诗" in hints and GAME_HANT[12] in hints and "稀有度" in hints
        # hover: the annotation card
        rarity.hover()
        page.wait_for_selector("#ann-tip:not([hidden])")
        tip = page.text_content("#ann-tip")
        assert "稀有度" in tip and "史诗" in tip and "equ.rarity" in tip
        page.hover("#viewer .ann[data-rule='equ.skill-levelup']")
        page.wait_for_function("document.querySelector('#ann-tip').textContent.includes('gorecross.skl')")
        assert "skill/swordmanskill.lst" in page.text_content("#ann-tip")
        # the item card
        card = page.locator("#item-card")
        assert card.is_visible() and "rarity-4" in (card.get_attribute("class") or "")
        text = card.text_content()
        assert GAME_HANT[1] + GAME_HANT[3] in text and "Lv 50" in text and "鬼剑士" in text
        assert "力量 +30" in text and "物理攻击 800 ~ 880" in text and "sword.img" in text
        # English
        page.select_option("#ann-lang", "en")
        page.wait_for_function(
            "[...document.querySelectorAll('#viewer .ann-hint')].some(h => h.textContent === 'Epic')"
        )
        page.wait_for_function("document.querySelector('#item-card').textContent.includes('Strength +30')")
        # a reference is a link that opens its file
        page.click(f"#viewer a.ann-link:text('{GAME_HANT[12]}')")
        page.wait_for_function("document.querySelector('#file-path').textContent.includes('gorecross.skl')")
        page.wait_for_selector("body[data-annotated='skill/annotated/swordman/gorecross.skl']")
        assert page.locator("#item-card").is_hidden()
        assert "Required level" in page.locator("#viewer .ann-hint").all_text_contents()
        # the rules panel: search by a label in the other language, detail with an example file
        page.fill("#ann-q", "史诗")
        page.wait_for_selector("#ann-rules li[data-id='equ.rarity']")
        page.click("#ann-rules li[data-id='equ.rarity']")
        page.wait_for_selector("#ann-detail:not([hidden])")
        detail = page.text_content("#ann-detail")
        assert "builtin" in detail and "config/annotations.json" in detail
        page.click("#ann-detail .ann-ex")
        page.wait_for_function("document.querySelector('#file-path').textContent.includes('.equ')")
        # edit a user rule file with a live preview on the open file, then save it
        page.fill("#search", "swordman_sword")
        page.click("#tree-rows .row.file[title$='swordman_sword.equ']")
        page.wait_for_selector(f"body[data-annotated='{SWORD}']")
        page.click("#ann-edit summary")
        page.wait_for_function(
            "document.querySelector('#ann-text').value.includes('deskbridge-pvf-annotations')"
        )
        page.fill("#ann-text", RULE)
        page.fill("#ann-new", "10-mine.json")
        page.click("#ann-preview")
        page.wait_for_function(
            "[...document.querySelectorAll('#viewer .ann-hint')].some(h => h.textContent === 'Gold')"
        )
        assert not (deskbridge_home / "config" / "pvf-annotations" / "10-mine.json").exists()
        page.fill("#ann-text", RULE.replace('"type": "enum"', '"type": "colour"'))
        page.click("#ann-save")
        page.wait_for_function(
            "document.querySelector('#ann-status').textContent.includes('annotation.type')"
        )
        page.fill("#ann-text", RULE)
        page.click("#ann-save")
        page.wait_for_function(
            "document.querySelector('#ann-status').textContent.includes('saved 10-mine.json')"
        )
        saved = deskbridge_home / "config" / "pvf-annotations" / "10-mine.json"
        assert saved.read_text("utf-8") == RULE
        page.wait_for_function(
            "[...document.querySelectorAll('#viewer .ann-hint')].some(h => h.textContent === 'Gold')"
        )
        assert not errors, errors
