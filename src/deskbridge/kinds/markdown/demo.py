"""A sample notes folder for `deskbridge demo`: a few realistic Markdown notes that show every feature.

Front matter, headings for the outline and `md_patch_section`, tables, task lists, footnotes, math, code,
CJK text and an emoji outside the Basic Multilingual Plane (the offset trap), plus a local image so the
self-contained HTML export has something to inline.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Final

_PNG_1X1: Final = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

NOTES: Final[dict[str, str]] = {
    "README.md": """---
title: Project notes
tags: [demo, deskbridge]
updated: 2026-11-30
---

# Project notes

Welcome! These notes show what an AI client can do **live** while you watch: read the outline, search,
edit a section, and ask before anything changes.

## Plan

- [x] Collect requirements
- [ ] Write the design
- [ ] Review with the team

## Numbers

| Metric | Target | Now |
|:-------|-------:|----:|
| Outline of 120k lines | ≤ 100 ms | see `bench/markdown.py` |
| Spec examples | 652 + 677 | see `tests/kinds/markdown/test_spec.py` |

## Math

The area of a circle is $A = \\pi r^2$, and

$$
\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}
$$

## Links

See the [meeting notes](meetings/2026-11-30.md)[^1] and www.commonmark.org.

![logo](images/dot.png)

[^1]: Notes of the kickoff; extended autolinks like www.commonmark.org are a GFM extension.
""",
    "meetings/2026-11-30.md": """# Meeting 2026-11-30

## Attendees

- Ana
- 李雷
- Sam 😀

## Decisions

1. Ship the outline tool first.
2. Edits always carry `expectedRevision`.

## Action items

- [ ] Ana: draft the release notes
- [ ] 李雷: ~~benchmark~~ measure the outline
""",
    "ideas.md": """Ideas
=====

Small ideas worth keeping.

Offline export
--------------

Export to HTML, PDF, PNG and Word without any network access.

```python
# not a heading: this line is inside a code block
print("hello")
```

Rich copy
---------

Copy the rendered note for WeChat, Zhihu or Juejin with inline styles.
""",
}


def make_sample_notes(directory: Path) -> Path:
    """Write the sample notes into `directory` (created if needed; existing files are left alone)."""
    directory = Path(directory)
    for rel, text in NOTES.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text(text, encoding="utf-8")
    image = directory / "images" / "dot.png"
    image.parent.mkdir(parents=True, exist_ok=True)
    if not image.exists():
        image.write_bytes(_PNG_1X1)
    return directory


_WORDS: Final = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "markdown",
    "editor",
    "outline",
    "preview",
    "section",
    "table",
    "list",
    "中文",
    "文档",
    "标题",
    "段落",
    "😀",
    "𝄞",
    "café",
    "naïve",
]


def make_stress_document(lines: int = 120_000, seed: int = 7) -> str:
    """A deterministic document of `lines` lines (~8-9 MB at 120,000, like Vex's stress test): headings of
    levels 1-3, paragraphs with CJK and astral characters, fenced code with '#' lines, tables and task lists."""
    import random

    rnd = random.Random(seed)
    out: list[str] = []
    section = 0
    while len(out) < lines:
        section += 1
        out.append("#" * rnd.choice((1, 2, 2, 3, 3, 3)) + f" Section {section} {rnd.choice(_WORDS)}")
        out.append("")
        kind = rnd.random()
        if kind < 0.15:
            out += ["```python", *(f"# not a heading {i}" for i in range(6)), "```"]
        elif kind < 0.25:
            out += ["| a | b |", "|---|---|", *(f"| {i} | {rnd.choice(_WORDS)} |" for i in range(5))]
        elif kind < 0.35:
            out += [f"- [ ] item {i} {rnd.choice(_WORDS)}" for i in range(6)]
        for _ in range(rnd.randint(3, 12)):
            out.append(" ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(15, 36))))
        out.append("")
    return "\n".join(out[:lines]) + "\n"
