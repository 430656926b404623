"""MD-EDIT (TARGETS.md), browser leg: an MCP edit sent over Streamable HTTP to a real `deskbridge serve` until the
open editor has applied it — on a 120,000-line document (median ≤ 50 ms; Vex refreshes after 220 ms). Also: how
long the editor takes to load and how long until a person's typing is accepted by the server.

    python bench/markdown_browser.py [--lines 120000] [--edits 20]

Needs Debian's Chromium (/usr/bin/chromium) and the `playwright` package; writes bench/results/markdown_browser.json.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result
from deskbridge.kinds.markdown.demo import make_stress_document
from deskbridge.testing import ServerThread

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def edit_repeatedly(page, call, edits: int, rng: random.Random) -> list[float]:
    """MCP edits, each timed from the call until the page has put it on screen."""
    latencies: list[float] = []
    for i in range(edits):
        doc = call("md_get_current_document", {"maxBytes": 64 * 1024}).structured_content
        lines = [ln for ln in doc["markdown"].split("\n") if len(ln) > 24]
        anchor = rng.choice(lines)[:24]
        seen = page.evaluate("window.__aiSeen.length")
        t0 = time.time() * 1000
        result = call(
            "md_replace_text",
            {
                "oldText": anchor,
                "newText": f"{anchor} AI-{i}",
                "expectedOccurrences": doc["markdown"].count(anchor),
                "expectedRevision": doc["revision"],
            },
        )
        if result.is_error:
            continue  # the anchor also occurs beyond the page we read: pick another line next time
        page.wait_for_function(f"() => window.__aiSeen.length > {seen}", polling=5, timeout=30_000)
        latencies.append(page.evaluate(f"window.__aiSeen[{seen}]") - t0)
    return latencies


def measure(label: str, text: str, edits: int) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="deskbridge-md-bench-"))
    (folder / "README.md").write_text(text, "utf-8")
    with ServerThread(folder) as served, sync_playwright() as p:
        srv = served.srv
        srv.app.update_settings({"require_approval": False})
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 860})
        started = time.perf_counter()
        page.goto(srv.login_url())
        page.wait_for_function(
            "() => window.deskbridge && window.deskbridge.view", polling=5, timeout=120_000
        )
        editor_ready = time.perf_counter() - started
        page.wait_for_function(
            "() => window.deskbridge.preview?.querySelector('h1, h2')", polling=20, timeout=300_000
        )
        preview_ready = time.perf_counter() - started
        # The page announces each AI edit it has put on screen; compare its clock with ours (same machine).
        page.evaluate("""() => { window.__aiSeen = []; window.addEventListener('deskbridge:ai-edit',
            () => window.__aiSeen.push(performance.timeOrigin + performance.now())); }""")
        rng = random.Random(1)
        # One MCP client for the whole run, as an agent keeps its connection: the figure is the edit, not the
        # client's start-up.
        with served.client() as call:
            latencies = edit_repeatedly(page, call, edits, rng)
        page.click(".cm-content")
        page.keyboard.press("Control+End")
        t0 = time.perf_counter()
        page.keyboard.type("typed by a person, fifty characters long........")
        typed = (time.perf_counter() - t0) * 1000
        page.wait_for_function("() => window.deskbridge.sync.pending() === 0", polling=5, timeout=30_000)
        accepted = (time.perf_counter() - t0) * 1000
        browser.close()
    return {
        "document": label,
        "characters": len(text),
        "editorReadyS": round(editor_ready, 2),
        "previewReadyS": round(preview_ready, 2),
        "aiEdits": len(latencies),
        "aiEditMedianMs": round(statistics.median(latencies), 1),
        "aiEditP90Ms": round(sorted(latencies)[max(0, int(len(latencies) * 0.9) - 1)], 1),
        "type50CharsMs": round(typed, 1),
        "typingAcceptedMs": round(accepted, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=120_000)
    parser.add_argument("--edits", type=int, default=20)
    args = parser.parse_args()
    small = "# Notes\n\n" + "".join(
        f"Line {i} of a short note, long enough to anchor an edit.\n" for i in range(20)
    )
    rows = [
        measure("21 lines", small, args.edits),
        measure(f"{args.lines:,} lines", make_stress_document(args.lines), args.edits),
    ]
    print(
        f"{'document':<16}{'AI edit median':>16}{'p90':>10}{'editor ready':>14}{'typing accepted':>17}   goal"
    )
    for row in rows:
        print(
            f"{row['document']:<16}{row['aiEditMedianMs']:>13.1f} ms{row['aiEditP90Ms']:>7.1f} ms"
            f"{row['editorReadyS']:>12.2f} s{row['typingAcceptedMs']:>14.1f} ms   MD-EDIT median <= 50 ms"
        )
    print(f"results: {write_result('markdown_browser', {'rows': rows})}")


if __name__ == "__main__":
    main()
