"""The Markdown editor's tests run against the real `deskbridge serve` (`deskbridge.testing`): a folder with notes.md
served on a loopback port with the platform's middleware, API, SSE, approvals and audit, plus helpers to act as an
AI client and to look at the server's state.

`served(bench)` runs the server on the test's own event loop (the route tests); `serving(bench)` runs it on its own
loop in a thread (the browser tests, which drive Playwright's sync API).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from deskbridge.app import App
from deskbridge.core.audit import AuditLog
from deskbridge.core.events import EventBus
from deskbridge.core.policy import ApprovalBroker
from deskbridge.core.tools import CallContext
from deskbridge.kinds.markdown.service import MarkdownService
from deskbridge.kinds.markdown.ui_state import UiState
from deskbridge.kinds.markdown.workspace import MarkdownWorkspace
from deskbridge.settings import Settings, save_settings
from deskbridge.testing import RunningServer, ServerThread, running_server

SAMPLE = """# Field notes

Deskbridge lets a person and an AI edit **the same** document.

## Math

Euler: $e^{i\\pi} + 1 = 0$

$$
\\int_0^1 x^2\\,dx = \\frac{1}{3}
$$

## Tasks

- [x] write the editor
- [ ] enjoy it

| Theme | Mood |
| --- | --- |
| dusk | calm |
"""

AI_CALLER = "mcp:pytest"


@dataclass
class Bench:
    """A folder to serve and, once served, everything a test needs to drive the editor from the server side."""

    root: Path
    srv: RunningServer | None = None
    loop: asyncio.AbstractEventLoop | None = None
    url: str = ""

    # -- the running platform ------------------------------------------------------------------------------
    @property
    def app(self) -> App:
        assert self.srv is not None, "serve the bench first (served() or serving())"
        return self.srv.app

    @property
    def workspace(self) -> MarkdownWorkspace:
        return cast(MarkdownWorkspace, self.app.workspace)

    @property
    def service(self) -> MarkdownService:
        return self.workspace.service

    @property
    def ui_state(self) -> UiState:
        return self.workspace.ui_state

    @property
    def bus(self) -> EventBus:
        return self.app.events

    @property
    def broker(self) -> ApprovalBroker:
        return self.app.approvals

    @property
    def audit(self) -> AuditLog:
        return self.app.audit

    @property
    def settings(self) -> dict[str, Any]:
        """The platform's settings as GET /api/settings shows them."""
        return self.app.settings.model_dump(by_alias=True)

    @property
    def token(self) -> str:
        return self.app.token

    @property
    def launch_url(self) -> str:
        """A one-time login link like the one `deskbridge serve` hands the browser (a fresh code on each read;
        the server exchanges it for the UI cookie)."""
        assert self.srv is not None, "serve the bench first (served() or serving())"
        return self.srv.login_url()

    def ui_headers(self) -> dict[str, str]:
        """What the editor's own requests carry, for the route tests' HTTP client."""
        assert self.srv is not None
        return self.srv.ui_headers()

    # -- acting as an MCP client --------------------------------------------------------------------------
    async def ai_edit(
        self,
        find: str,
        replacement: str,
        *,
        caller: str = AI_CALLER,
        doc_id: str | None = None,
        occurrence: int = 0,
    ) -> dict[str, Any]:
        """Replace the `occurrence`-th `find` in the current text with md_apply_text_edit, through `App.invoke`
        (what the MCP endpoint calls for every tool call: validation, approval, audit) under the caller id
        `caller`, so tests can tell its updates apart. Raises the tool's BridgeError."""
        doc = self.service.read(doc_id)
        text = doc["text"]
        at = -1
        for _ in range(occurrence + 1):
            at = text.index(find, at + 1)
        arguments = {
            "docId": doc["docId"],
            "startOffset": at,
            "length": len(find),
            "expectedText": find,
            "replacement": replacement,
            "expectedRevision": doc["revision"],
            "reason": f"replace {find!r}",
        }
        return await self.app.invoke(
            "md_apply_text_edit", arguments, CallContext(caller=caller, client_name="pytest-agent")
        )

    # -- from the test thread (browser tests) ---------------------------------------------------------------
    def call(self, coro: Any, timeout: float = 30.0) -> Any:
        """Run a coroutine on the server's loop from the test thread (the browser tests)."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def submit(self, coro: Any) -> Any:
        """Start a coroutine on the server's loop and return its concurrent future (e.g. an edit awaiting approval)."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def set_require_approval(self, on: bool) -> None:
        """Switch approvals as the settings panel does (`App.update_settings`), and wait until the open workspace
        follows, so the next edit sees the new rule."""
        self.call(self._set_require_approval(on))

    async def _set_require_approval(self, on: bool) -> None:
        self.app.update_settings({"require_approval": on})
        async with asyncio.timeout(5):
            while self.workspace.rules.enabled is not on:
                await asyncio.sleep(0.01)


def make_bench(root: Path, *, text: str = SAMPLE, require_approval: bool = True) -> Bench:
    """A folder with notes.md (+ a second file) and deskbridge settings saying whether edits need approval.

    The settings go to the test's own deskbridge home (`DESKBRIDGE_HOME`, set by tests/conftest.py), where the
    served App reads them at start."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "notes.md").write_text(text, encoding="utf-8")
    (root / "ideas.md").write_text("# Ideas\n\n- one\n- two\n", encoding="utf-8")
    save_settings(Settings(require_approval=require_approval))
    return Bench(root)


def _attach(bench: Bench, srv: RunningServer, loop: asyncio.AbstractEventLoop) -> None:
    bench.srv, bench.loop, bench.url = srv, loop, srv.base_url
    assert bench.service.current_id is not None, "serving notes.md opens it"


@contextlib.asynccontextmanager
async def served(bench: Bench) -> AsyncIterator[Bench]:
    """`deskbridge serve notes.md` on the running event loop until the block exits."""
    async with running_server(bench.root / "notes.md", kind="markdown") as srv:
        _attach(bench, srv, asyncio.get_running_loop())
        yield bench


@contextlib.contextmanager
def serving(bench: Bench) -> Iterator[Bench]:
    """`deskbridge serve notes.md` on its own loop in a thread until the block exits; `bench.url` is its address."""
    with ServerThread(bench.root / "notes.md", kind="markdown") as thread:
        assert thread.srv is not None
        _attach(bench, thread.srv, thread.loop)
        yield bench
