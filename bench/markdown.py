"""Markdown benchmarks (TARGETS.md): MD-OUTLINE, MD-SPEC, MD-EDIT (server leg).

* MD-OUTLINE — outline of the generated 120,000-line document (`make_stress_document`, ~10 M characters, the
  size of Vex's stress test; Vex: 154 ms). Median of several runs, in process.
* MD-SPEC — CommonMark 0.31.2 and GFM 0.29 spec examples through the one renderer (tests/data).
* MD-EDIT — an MCP edit (`md_apply_text_edit`, approval off: the person's decision time is not ours) on the
  120,000-line document until the `doc` update event reaches an event-bus subscriber (what the SSE stream
  sends the browser), plus the incremental preview re-render the browser then shows. The browser leg (SSE →
  CodeMirror pull) is added by the web UI's end-to-end benchmark, which can call `measure_edit_to_event`.

Prints a table and writes `bench/results/markdown.json`. Run with `nice`: the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, summary_ms, write_result
from deskbridge.core.events import EventBus
from deskbridge.core.tools import CallContext
from deskbridge.kinds.markdown.demo import make_stress_document
from deskbridge.kinds.markdown.outline import outline
from deskbridge.kinds.markdown.render import render_spec
from deskbridge.kinds.markdown.service import MarkdownService
from deskbridge.kinds.markdown.tools import markdown_tools

sys.path.insert(0, str(ROOT / "tests" / "kinds" / "markdown"))
from spec_normalize import normalize_html

DATA = ROOT / "tests" / "data"
AI = CallContext(caller="mcp:bench", client_name="bench")


def bench_outline(text: str, runs: int) -> dict[str, Any]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        heads = outline(text)
        samples.append(time.perf_counter() - start)
    return {
        **summary_ms(samples),
        "headings": len(heads),
        "lines": text.count("\n"),
        "chars": len(text),
        "target_ms": 100,
        "anchor_vex_ms": 154,
    }


def bench_spec() -> dict[str, Any]:
    cm = json.loads((DATA / "commonmark" / "spec-0.31.2.json").read_text(encoding="utf-8"))
    gfm = json.loads((DATA / "gfm" / "spec-0.29-gfm.json").read_text(encoding="utf-8"))
    cm_fail = [
        c["example"]
        for c in cm
        if normalize_html(render_spec(c["markdown"], gfm=False)) != normalize_html(c["html"])
    ]
    gfm_fail = [
        c["example"]
        for c in gfm
        if normalize_html(render_spec(c["markdown"], gfm="(extension)" in c["section"]))
        != normalize_html(c["html"])
    ]
    return {
        "commonmark": {"passed": len(cm) - len(cm_fail), "total": len(cm), "failed": cm_fail},
        "gfm": {"passed": len(gfm) - len(gfm_fail), "total": len(gfm), "failed": gfm_fail},
    }


async def measure_edit_to_event(
    service: MarkdownService, bus: EventBus, edits: int, preview: bool = False
) -> dict[str, Any]:
    """Time `edits` MCP text edits from the tool call until the `doc` update event is delivered to a bus
    subscriber; with `preview`, also the incremental preview render that follows."""
    tool = {s.name: s for s in markdown_tools(service)}["md_apply_text_edit"]
    sub = bus.subscribe("doc")
    to_event: list[float] = []
    to_preview: list[float] = []
    try:
        if preview:
            service.preview_html()  # the preview the browser already shows
        for i in range(edits):
            doc = service.get()
            text = doc.text
            at = text.index("Section", (len(text) // edits) * i)
            args = tool.args.model_validate(
                {
                    "startOffset": at,
                    "length": 7,
                    "expectedText": "Section",
                    "replacement": "Chapter",
                    "expectedRevision": doc.revision,
                }
            )
            start = time.perf_counter()
            await tool.handler(AI, args)
            while True:
                event = await sub.get(timeout=5)
                if event.data.get("type") == "update":
                    break
            to_event.append(time.perf_counter() - start)
            if preview:
                service.preview_html()  # what the web UI's preview route serves next
                to_preview.append(time.perf_counter() - start)
    finally:
        sub.close()
    out: dict[str, Any] = {"to_event": summary_ms(to_event), "target_ms": 50, "anchor_vex_debounce_ms": 220}
    if to_preview:
        out["to_event_and_preview"] = summary_ms(to_preview)
    return out


def bench_edit(text: str, edits: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="deskbridge-md-bench-") as tmp:
        path = Path(tmp) / "stress.md"
        path.write_text(text, encoding="utf-8")
        bus = EventBus()
        service = MarkdownService(path, events=bus, approval_settings={"enabled": False})

        async def run() -> dict[str, Any]:
            return await measure_edit_to_event(service, bus, edits, preview=True)

        return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=120_000)
    parser.add_argument("--runs", type=int, default=7, help="outline runs (median reported)")
    parser.add_argument("--edits", type=int, default=30)
    args = parser.parse_args()

    text = make_stress_document(args.lines)
    results: dict[str, Any] = {
        "document": {"lines": text.count("\n"), "chars": len(text), "utf8_bytes": len(text.encode())}
    }
    results["MD-OUTLINE"] = bench_outline(text, args.runs)
    results["MD-SPEC"] = bench_spec()
    results["MD-EDIT"] = bench_edit(text, args.edits)

    o, s, e = results["MD-OUTLINE"], results["MD-SPEC"], results["MD-EDIT"]
    rows = [
        (
            "MD-OUTLINE",
            f"{o['median_ms']:.1f} ms median (min {o['min_ms']:.1f}) for {o['lines']} lines, "
            f"{o['headings']} headings",
            "≤ 100 ms (Vex 154 ms)",
        ),
        (
            "MD-SPEC",
            f"CommonMark {s['commonmark']['passed']}/{s['commonmark']['total']}, "
            f"GFM {s['gfm']['passed']}/{s['gfm']['total']} (failed: {s['gfm']['failed']})",
            "652/652 and all GFM",
        ),
        (
            "MD-EDIT",
            f"{e['to_event']['median_ms']:.1f} ms median to the event "
            f"(p99 {e['to_event']['p99_ms']:.1f}); with preview re-render "
            f"{e['to_event_and_preview']['median_ms']:.1f} ms",
            "≤ 50 ms (server leg)",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'id':<{width}}  {'measured':<90}  target")
    for rid, measured, target in rows:
        print(f"{rid:<{width}}  {measured:<90}  {target}")
    results["median_note"] = "medians over the runs in this process; the machine is shared, quote ratios"
    path = write_result("markdown", results)
    print(f"wrote {path.relative_to(ROOT)}  (statistics {statistics.__name__})")


if __name__ == "__main__":
    main()
