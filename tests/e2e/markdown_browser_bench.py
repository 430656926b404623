"""MD-EDIT, browser leg: how long an MCP edit takes to be applied in an open editor, on a small and on a
120,000-line document (TARGETS.md: median ≤ 50 ms; Vex refreshes after 220 ms). Also: editor load time and
how long until the person's typing is accepted by the server.

Not a test (no assertions on time): run `nice .venv/bin/python tests/e2e/markdown_browser_bench.py [--lines N]`.
Prints a table and writes `.cache/bench/markdown_browser.json`. Needs /usr/bin/chromium and `playwright`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

HERE = Path(__file__).resolve()
spec = importlib.util.spec_from_file_location("markdown_ui_harness", HERE.parents[1] / "kinds/markdown/ui/harness.py")
harness = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = harness
spec.loader.exec_module(harness)


def big_document(lines: int) -> str:
    """About 86 characters a line like Vex's stress document: headings, prose, lists, code, tables."""
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "editor", "preview", "文档", "同步", "markdown", "outline", "sample", "quick", "brown", "fox"]
    out: list[str] = []
    section = 0
    while len(out) < lines:
        section += 1
        out += [f"## Section {section}", ""]
        for _ in range(6):
            out.append(" ".join(rng.choice(words) for _ in range(13)) + ".")
        out += ["", "- item one", "- item two", "", "```python", "print('hello')", "```", "",
                "| a | b |", "| --- | --- |", "| 1 | 2 |", ""]
    return "\n".join(out[:lines]) + "\n"


def measure(label: str, text: str, edits: int) -> dict:
    bench = harness.make_bench(Path(tempfile.mkdtemp()) / "notes", text=text, require_approval=False)
    with harness.serving(bench), sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                          "--disable-component-update", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1400, "height": 860})
        started = time.perf_counter()
        page.goto(bench.url + "/")
        page.wait_for_function("() => window.deskbridge && window.deskbridge.view", polling=5, timeout=120_000)
        editor_ready = time.perf_counter() - started
        page.wait_for_function("() => document.querySelector('#preview h1, #preview h2')", polling=20, timeout=300_000)
        preview_ready = time.perf_counter() - started

        # The page announces each AI edit it has put on screen; compare its wall clock with ours (same machine).
        page.evaluate("""() => { window.__aiSeen = []; window.addEventListener('deskbridge:ai-edit',
            () => window.__aiSeen.push(performance.timeOrigin + performance.now())); }""")
        rng = random.Random(1)
        doc_lines = bench.service.read()["text"].split("\n")
        latencies = []
        for i in range(edits):
            marker = f"AI-EDIT-{i}-{rng.randrange(10**9)}"
            line = rng.randrange(len(doc_lines) - 1)
            anchor = doc_lines[line][:20] or None
            if not anchor:
                continue
            seen = page.evaluate("window.__aiSeen.length")
            t0 = time.time() * 1000
            bench.call(bench.ai_edit(anchor, f"{anchor} {marker}"))
            page.wait_for_function(f"() => window.__aiSeen.length > {seen}", polling=5, timeout=30_000)
            latencies.append(page.evaluate(f"window.__aiSeen[{seen}]") - t0)
            doc_lines = bench.service.read()["text"].split("\n")

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
        "aiEditMedianMs": round(statistics.median(latencies), 1),
        "aiEditP90Ms": round(sorted(latencies)[int(len(latencies) * 0.9) - 1], 1),
        "aiEdits": len(latencies),
        "type50CharsMs": round(typed, 1),
        "typingAcceptedMs": round(accepted, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=120_000)
    parser.add_argument("--edits", type=int, default=20)
    args = parser.parse_args()
    rows = [measure("sample (21 lines)", harness.SAMPLE, args.edits),
            measure(f"{args.lines:,} lines", big_document(args.lines), args.edits)]
    keys = list(rows[0])
    print(" | ".join(keys))
    for row in rows:
        print(" | ".join(str(row[k]) for k in keys))
    out = HERE.parents[2] / ".cache" / "bench" / "markdown_browser.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2, ensure_ascii=False), "utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
