"""Every UI string exists in the four languages, and the browser's choice lists match the server's UiState."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from deskbridge.kinds.markdown.ui_state import EDITOR_COMMANDS, LANGUAGES, THEMES, TYPOGRAPHIES

FRONTEND = Path(__file__).resolve().parents[4] / "frontend" / "markdown"


@pytest.fixture(scope="module")
def summary() -> dict:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (needed only to read the editor's JavaScript sources)")
    done = subprocess.run([node, "check-i18n.mjs"], cwd=FRONTEND, capture_output=True, text=True, timeout=60)
    data = json.loads(done.stdout)
    data["exit"] = done.returncode
    return data


def test_every_string_is_translated_and_every_used_key_exists(summary):
    assert summary["problems"] == [] and summary["exit"] == 0
    assert summary["keys"] > 150


def test_the_browser_offers_exactly_the_servers_choices(summary):
    assert sorted(summary["languages"]) == sorted(LANGUAGES)
    assert summary["themes"] == list(THEMES)
    assert summary["typographies"] == list(TYPOGRAPHIES)
    assert summary["commands"] == list(EDITOR_COMMANDS)


def test_every_typography_theme_has_its_own_css():
    css = (FRONTEND / "src" / "styles" / "typography.css").read_text("utf-8")
    for key in TYPOGRAPHIES:
        assert f'.preview[data-typo="{key}"]' in css, key


def test_every_colour_theme_has_its_own_css():
    css = (FRONTEND / "src" / "styles" / "app.css").read_text("utf-8")
    for key in THEMES:
        if key not in ("system", "light"):  # light is the base; system follows prefers-color-scheme
            assert f':root[data-theme="{key}"]' in css, key
    assert "prefers-color-scheme: dark" in css
