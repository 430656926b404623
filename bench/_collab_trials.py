"""REL-COLLAB trials (issue 10 data loss 2): a person types in Chromium at 30–120 ms per key while an agent edits
the same document over MCP before, after and at the person's cursor; CJK included. A trial passes when the editor
and the server agree and nothing is lost or misplaced: every AI insertion that was accepted is in the text once,
and removing them gives the document with exactly the person's keystrokes at the place they typed them.

Used by tests/e2e/markdown_collab_test.py (a CI-sized run) and bench/markdown_collab.py (≥ 200 trials).
"""

from __future__ import annotations

import random
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deskbridge.testing import ServerThread

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]

BASE = (
    "# Collab trial\n\nA first paragraph with some words.\n\n## 中文段落\n\n这是一段中文文本，用来测试。\n\n"
    "Another line of text here.\n\nTYPE-HERE: \n\nAfter the cursor line.\n\nTAIL\n\nLast words of the "
    "document, 日本語のテキストも。\n"
)
ANCHOR = "TYPE-HERE: "
ALPHABET = "abcdefghijklmnopqrstuvwxyz     ABCDEF中文输入法日本語テスト"
MARK = re.compile(r"⟦\d+⟧")


@dataclass
class Trial:
    index: int
    delay_ms: int
    typed: str
    ai_ok: list[str] = field(default_factory=list)
    ai_refused: int = 0
    refusals: list[str] = field(default_factory=list)
    wheres: list[str] = field(default_factory=list)
    passed: bool = False
    problem: str = ""


class Session:
    """One served document, one Chromium page on it and one MCP client (the agent) for many trials."""

    def __init__(self, playwright: Any) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="deskbridge-collab-"))
        (self.folder / "trial.md").write_text(BASE, "utf-8")
        self.served = ServerThread(self.folder / "trial.md")
        self.served.__enter__()
        srv = self.served.srv
        assert srv is not None
        srv.app.update_settings({"require_approval": False})
        self._client_cm = self.served.client()
        self.call = self._client_cm.__enter__()
        self.browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        self.page = self.browser.new_page(viewport={"width": 1200, "height": 800})
        self.errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.goto(srv.login_url())
        self.page.wait_for_function("() => document.body.dataset.ready === '1' && window.deskbridge.view")

    def close(self) -> None:
        self.browser.close()
        self._client_cm.__exit__(None, None, None)
        self.served.__exit__(None, None, None)

    # -- one trial --------------------------------------------------------------------------------------
    def _read(self) -> dict[str, Any]:
        result = self.call("md_get_current_document", {"maxBytes": 256 * 1024})
        assert not result.is_error, result.content
        return result.structured_content

    def _reset(self) -> None:
        doc = self._read()
        if doc["markdown"] != BASE:
            r = self.call(
                "md_replace_current_document", {"markdown": BASE, "expectedRevision": doc["revision"]}
            )
            assert not r.is_error, r.content
        self.page.wait_for_function(
            "(t) => window.deskbridge.view.state.doc.toString() === t && window.deskbridge.sync.pending() === 0",
            arg=BASE,
            timeout=10_000,
        )

    def _agent(self, trial: Trial, rng: random.Random, stop: threading.Event, counter: list[int]) -> None:
        edits = rng.randint(1, 4)
        time.sleep(rng.uniform(0.05, 0.4))
        for _ in range(edits):
            if stop.is_set():
                break
            counter[0] += 1
            marker = f"⟦{counter[0]}⟧"
            where = rng.choice(["before", "after", "cursor", "replace"])
            trial.wheres.append(where)
            doc = self._read()
            text = doc["markdown"]
            if where == "replace":
                # the whole document replaced with one that differs before and after the person's line
                counter[0] += 1
                second = f"⟦{counter[0]}⟧"
                tail = text.find("\nTAIL")
                new = marker + text[: tail + 1] + "TAIL" + second + text[tail + 5 :]
                result = self.call(
                    "md_replace_current_document", {"markdown": new, "expectedRevision": doc["revision"]}
                )
                if result.is_error:
                    trial.ai_refused += 1
                    trial.refusals.append(f"{where}: {result.content[0].text[:160]}")
                else:
                    trial.ai_ok += [marker, second]
                time.sleep(rng.uniform(0.05, 0.5))
                continue
            anchor = text.find(ANCHOR)
            if where == "before":
                starts = [0, *(m.end() for m in re.finditer("\n", text[:anchor]))]
                args = {"offset": rng.choice(starts)}
            elif where == "after":
                tail = text.find("\nTAIL")
                starts = [tail + 1 + m.end() for m in re.finditer("\n", text[tail + 1 :])]
                args = {"offset": rng.choice(starts or [len(text)])}
            else:
                args = {}  # at the person's cursor (the selection the editor reported)
            result = self.call(
                "md_insert_text", {"text": marker, "expectedRevision": doc["revision"], **args}
            )
            if result.is_error:
                trial.ai_refused += 1
                trial.refusals.append(f"{where}: {result.content[0].text[:160]}")
            else:
                trial.ai_ok.append(marker)
            time.sleep(rng.uniform(0.05, 0.5))

    def run(self, index: int, rng: random.Random, counter: list[int]) -> Trial:
        self._reset()
        typed = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(12, 32)))
        trial = Trial(index, rng.randint(30, 120), typed)
        page = self.page
        page.evaluate(
            "(a) => { const v = window.deskbridge.view; const at = v.state.doc.toString().indexOf(a) + a.length;"
            " v.dispatch({selection: {anchor: at}}); v.focus(); }",
            ANCHOR,
        )
        stop = threading.Event()
        agent = threading.Thread(target=self._agent, args=(trial, random.Random(rng.random()), stop, counter))
        agent.start()
        page.keyboard.type(typed, delay=trial.delay_ms)
        agent.join(30)
        stop.set()
        try:
            page.wait_for_function("() => window.deskbridge.sync.pending() === 0", timeout=10_000)
        except Exception:
            trial.problem = "the editor kept unsynced changes"
            return trial
        deadline = time.monotonic() + 10
        while True:
            editor = page.evaluate("window.deskbridge.view.state.doc.toString()")
            server = self._read()["markdown"]
            if editor == server or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        expected = BASE.replace(ANCHOR, ANCHOR + typed, 1)
        if editor != server:
            trial.problem = "editor and server differ"
        elif any(server.count(m) != 1 for m in trial.ai_ok):
            trial.problem = f"an AI edit was lost: {[m for m in trial.ai_ok if server.count(m) != 1]}"
        elif len(MARK.findall(server)) != len(trial.ai_ok):
            trial.problem = "an AI edit appeared twice or from nowhere"
        elif MARK.sub("", server) != expected:
            got = MARK.sub("", server)
            at = next(
                (i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b),
                min(len(got), len(expected)),
            )
            trial.problem = f"keystrokes lost or misplaced near {at}: got {got[max(0, at - 20) : at + 40]!r}, want {expected[max(0, at - 20) : at + 40]!r}"
        else:
            trial.passed = True
        return trial


def run_trials(count: int, seed: int = 1) -> tuple[list[Trial], list[str]]:
    from playwright.sync_api import sync_playwright

    rng = random.Random(seed)
    counter = [0]
    trials: list[Trial] = []
    with sync_playwright() as p:
        session = Session(p)
        try:
            for i in range(count):
                trials.append(session.run(i, rng, counter))
        finally:
            errors = list(session.errors)
            session.close()
    return trials, errors
