"""The committed editor bundle: complete, small, locked down, and built from the sources as they are now."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from deskbridge.kinds.markdown.web import STATIC_DIR

FRONTEND = Path(__file__).resolve().parents[4] / "frontend" / "markdown"

APP_JS_MAX_BYTES = 600 * 1024
BUNDLE_MAX_BYTES = 1200 * 1024
"""Size budget of the committed bundle (app.js + lazy KaTeX chunk + CSS + woff2 fonts); see docs/markdown-ui.md."""


def test_the_bundle_was_built_from_the_current_sources():
    # Same digest as build.mjs: sorted relative paths with their bytes, NUL-separated.
    files = [
        "build.mjs",
        "index.html",
        "package-lock.json",
        "../../src/deskbridge/web/static/approval-guard.js",
    ]
    files += [p.relative_to(FRONTEND).as_posix() for p in (FRONTEND / "src").rglob("*") if p.is_file()]
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + (FRONTEND / name).read_bytes() + b"\0")
    info = json.loads((STATIC_DIR / "build-info.json").read_text("utf-8"))
    assert info["sources"] == digest.hexdigest(), (
        "frontend/markdown changed: run `npm run build` there and commit"
    )


def test_the_page_loads_only_its_own_scripts():
    page = (STATIC_DIR / "index.html").read_text("utf-8")
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert "object-src 'none'" in csp and "base-uri 'none'" in csp
    for ref in re.findall(r'(?:src|href)="/static/([^"]+)"', page):
        assert (STATIC_DIR / ref).is_file(), ref


def test_every_asset_the_bundle_refers_to_is_committed():
    for css in ("app.css", "katex.css"):
        for ref in re.findall(r"url\(([^)]+)\)", (STATIC_DIR / css).read_text("utf-8")):
            ref = ref.strip("'\"")
            if not ref.startswith("data:"):
                assert (STATIC_DIR / ref).is_file(), f"{css} → {ref}"
    app = (STATIC_DIR / "app.js").read_text("utf-8")
    for chunk in re.findall(r'"\./(chunks/[\w.-]+\.js)"', app):
        assert (STATIC_DIR / chunk).is_file(), chunk


def test_the_bundle_stays_small_and_has_no_source_maps():
    sizes = {
        p.relative_to(STATIC_DIR).as_posix(): p.stat().st_size for p in STATIC_DIR.rglob("*") if p.is_file()
    }
    assert not [name for name in sizes if name.endswith(".map")]
    assert sizes["app.js"] <= APP_JS_MAX_BYTES
    assert sum(sizes.values()) <= BUNDLE_MAX_BYTES
    assert "THIRD-PARTY-NOTICES.txt" in sizes
