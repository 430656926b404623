"""A tiny built-in kind for transport tests, latency benchmarks and the MCP conformance suite.

It opens a folder and offers a handful of tools that exercise every path of the MCP layer: a read, a slow call
with progress, a business error, and a guarded write. Open it with `deskbridge serve DIR --kind probe`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import Field

from deskbridge.core import limits
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.tools import CallContext, NoArgs, ToolArgs, ToolSpec
from deskbridge.kinds.base import KindServices, KindWorkspaceBase
from deskbridge.kinds.probe_fixtures import fixture_tools


class EchoArgs(ToolArgs):
    text: str = Field(description="Any text; it comes back unchanged.", max_length=65536)


class ReadArgs(ToolArgs):
    path: str = Field(description="A file path relative to the opened folder.")


class SlowArgs(ToolArgs):
    steps: int = Field(3, ge=1, le=100, description="How many progress steps to report.")
    delay_ms: int = Field(10, ge=0, le=5000, description="Pause between steps, in milliseconds.")


class FailArgs(ToolArgs):
    code: str = Field("NOT_FOUND", description="The error code to raise.")


class ProbeWorkspace(KindWorkspaceBase):
    """The probe workspace: a folder, read-only except for nothing at all."""

    kind = "probe"

    def __init__(self, path: Path, services: KindServices) -> None:
        self.path = path.resolve()
        self.services = services
        self.calls = 0

    def _resolve(self, rel: str) -> Path:
        from deskbridge.core.paths import resolve_path

        return resolve_path(rel, [self.path])

    async def _echo(self, ctx: CallContext, args: EchoArgs) -> dict[str, Any]:
        self.calls += 1
        return {"text": args.text, "caller": ctx.caller}

    def _read(self, ctx: CallContext, args: ReadArgs) -> dict[str, Any]:
        from deskbridge.core.files import read_regular_file

        target = self._resolve(args.path)
        # One bounded read of a regular file (a FIFO or /dev/zero is refused, never waited on); errors name the
        # path as given, never where a link points.
        try:
            data = read_regular_file(
                target, max_bytes=limits.RESPONSE_MAX_BYTES // 2, shown_as=repr(args.path)
            )
        except BridgeError as exc:
            if exc.code == ErrorCode.NOT_FOUND:
                raise BridgeError(
                    ErrorCode.NOT_FOUND,
                    f"no file {args.path!r} in the workspace",
                    hint="Call probe_status to see the workspace folder, then pass a path inside it.",
                ) from None
            raise
        return {"path": args.path, "text": data.decode("utf-8", errors="replace")}

    async def _slow(self, ctx: CallContext, args: SlowArgs) -> dict[str, Any]:
        for step in range(1, args.steps + 1):
            await asyncio.sleep(args.delay_ms / 1000)
            await ctx.progress(step, args.steps, f"step {step} of {args.steps}")
        return {"steps": args.steps}

    async def _fail(self, ctx: CallContext, args: FailArgs) -> dict[str, Any]:
        raise BridgeError(args.code, f"probe_fail was asked to fail with {args.code}")

    async def _status(self, ctx: CallContext, args: NoArgs) -> dict[str, Any]:
        return self.status()

    # The MCP conformance suite calls fixture tools by these exact names (research/mcp.md §3.1); they reuse the
    # probe's own handlers so the suite exercises the real paths: a plain result, progress, a business error.
    async def _conformance_text(self, ctx: CallContext, args: NoArgs) -> dict[str, Any]:
        return {"text": "This is a simple text response for testing."}

    async def _conformance_progress(self, ctx: CallContext, args: NoArgs) -> dict[str, Any]:
        return await self._slow(ctx, SlowArgs(steps=3, delay_ms=5))

    async def _conformance_error(self, ctx: CallContext, args: NoArgs) -> dict[str, Any]:
        return await self._fail(ctx, FailArgs(code="INVALID_ARGUMENT"))

    def tools(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                "probe_echo",
                "Echo text",
                "Return the text unchanged (transport check).",
                EchoArgs,
                self._echo,
                read_only=True,
                idempotent=True,
            ),
            ToolSpec(
                "probe_read_file",
                "Read a file",
                "Read a UTF-8 file inside the opened folder.",
                ReadArgs,
                self._read,
                read_only=True,
                idempotent=True,
                blocking=False,  # one read bounded to half the response cap, of a regular file only
            ),
            ToolSpec(
                "probe_slow",
                "Slow call with progress",
                "Sleep in steps, reporting progress.",
                SlowArgs,
                self._slow,
                read_only=True,
                idempotent=True,
            ),
            ToolSpec(
                "probe_fail",
                "Fail on purpose",
                "Raise the business error named by `code`.",
                FailArgs,
                self._fail,
                read_only=True,
                idempotent=True,
            ),
            ToolSpec(
                "probe_status",
                "Probe status",
                "The opened folder and call count.",
                NoArgs,
                self._status,
                read_only=True,
                idempotent=True,
            ),
            ToolSpec(
                "test_simple_text",
                "Conformance: text",
                "Conformance fixture: a plain result.",
                NoArgs,
                self._conformance_text,
                read_only=True,
                idempotent=True,
            ),
            ToolSpec(
                "test_tool_with_progress",
                "Conformance: progress",
                "Conformance fixture: three progress notifications.",
                NoArgs,
                self._conformance_progress,
                read_only=True,
                idempotent=True,
            ),
            *fixture_tools(),
            ToolSpec(
                "test_error_handling",
                "Conformance: error",
                "Conformance fixture: an isError result.",
                NoArgs,
                self._conformance_error,
                read_only=True,
                idempotent=True,
            ),
        ]

    def status(self) -> dict[str, Any]:
        return {**super().status(), "calls": self.calls}


def open_workspace(path: Path, services: KindServices) -> ProbeWorkspace:
    if not path.is_dir():
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"the probe kind opens a folder, not {str(path)!r}")
    return ProbeWorkspace(path, services)
