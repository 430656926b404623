"""The one Chromium set-up for the browser tests: Debian's Chromium driven by the `playwright` package.

`browser` is one Chromium per test module (module scope, as every e2e file had before: a session-wide sync
Playwright would keep its event loop alive under the asyncio tests that run between e2e modules).
`new_page(**context_options)` opens a page in a fresh browser context, records uncaught page errors on
`page.errors`, and closes the context after the test. Every e2e module uses these (the markdown editor's
files open their own contexts on this `browser`, with the viewport and downloads they need).

Skipped with a message when Chromium or the Python package is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")

# No background networking or component updates: this machine's closed network refuses Chromium's own
# connections, many at a time, and they only slow a start down.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    playwright_sync = pytest.importorskip(
        "playwright.sync_api", reason="pip install playwright (the Python package)"
    )
    if not CHROMIUM.exists():
        pytest.skip("Chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)")
    with playwright_sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def new_page(browser: Any) -> Iterator[Callable[..., Any]]:
    contexts: list[Any] = []

    def make(**context_options: Any) -> Any:
        context = browser.new_context(**context_options)
        contexts.append(context)
        page = context.new_page()
        page.errors = []
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        return page

    yield make
    for context in contexts:
        context.close()
