"""The `pvf_script_*` tools (the pvfine MCP design's script rows) over `scripting.runner.ScriptRuns`.

help → validate → run (taskId at once) → status (logs by cursor, progress, planId) → preview → apply (explicit
changeKeys + expected revision) / discard; cancel only your own run. Runs and plans are the engine's, so the
UI and every MCP client see and act on the same ones.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from deskbridge.core import limits
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.tools import CallContext, ResourceSpec, ToolSpec
from deskbridge.kinds.pvf.args import (
    PvfArgs,
    rehinted,
    request_id,
    revision,
    workspace_id,
)
from deskbridge.kinds.pvf.scripting.help import TOPICS
from deskbridge.kinds.pvf.scripting.runner import SOURCE_MAX_BYTES, runs_for, validate_source

RUN_LABEL = "pvf_script_run"
Source = Field(max_length=SOURCE_MAX_BYTES, description="The .pvf.js program.")


class HelpArgs(PvfArgs):
    topic: Literal["overview", "api", "types", "examples", "pitfalls"] = Field(
        "overview", description="types is a TypeScript .d.ts."
    )


class ValidateArgs(PvfArgs):
    source: str = Source


class RunArgs(PvfArgs):
    workspaceId: str = workspace_id()
    expectedRevision: int = revision(required=True)
    source: str = Source
    label: str | None = Field(None, max_length=200, description="Shown with the run.")
    requestId: str | None = request_id()


class StatusArgs(PvfArgs):
    taskId: str = Field(description="From pvf_script_run.")
    logCursor: str | None = Field(None, description="nextCursor to continue.")
    logMaxBytes: int = Field(
        limits.TASK_LOG_PAGE_MAX_BYTES, ge=256, le=limits.TASK_LOG_PAGE_MAX_BYTES, description="Log page cap."
    )


class CancelArgs(PvfArgs):
    taskId: str = Field(description="From pvf_script_run.")


SCRIPT_API_URI = "deskbridge://pvf/script-api/{topic}"


def script_resources() -> list[ResourceSpec]:
    """The `pvf_script_help` topics as MCP resources too (pvfine MCP design: the same topic documents "via
    pvf_script_help and optional MCP resources"), for clients that attach resources to the context."""

    def mime(variables: dict[str, str]) -> str:
        # `types` is a TypeScript declaration file; the other topics are Markdown-style prose.
        return "application/typescript" if variables["topic"] == "types" else "text/markdown"

    def read(variables: dict[str, str]) -> tuple[str, str]:
        return TOPICS[variables["topic"]], mime(variables)

    return [
        ResourceSpec(
            SCRIPT_API_URI,
            "pvf-script-api",
            "The .pvf.js script API by topic (overview, api, types = the .d.ts, examples, pitfalls); the same "
            "text as pvf_script_help.",
            read,
            values=lambda: [{"topic": t} for t in TOPICS],
            mime_of=mime,
            title="PVF script API",
        )
    ]


def _script_task(svc: Any, task_id: str) -> None:
    task = svc.engine.tasks.get(task_id)
    if task.label != RUN_LABEL:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"task {task_id} is not a script run ({task.label})",
            "Follow other tasks with pvf_task_status.",
        )


def script_tools(svc: Any, config_dir: Path | None = None) -> list[ToolSpec]:
    runs = runs_for(svc, config_dir)
    eng = svc.engine

    def help_(call: CallContext, args: HelpArgs) -> dict[str, Any]:
        return {"topic": args.topic, "text": TOPICS[args.topic], "topics": list(TOPICS)}

    async def validate(call: CallContext, args: ValidateArgs) -> dict[str, Any]:
        diags = await asyncio.to_thread(validate_source, args.source, runs.limits)
        return {"ok": not diags, "diagnostics": diags}

    async def run(call: CallContext, args: RunArgs) -> dict[str, Any]:
        task = runs.start(call.caller, args.workspaceId, args.expectedRevision, args.source, args.label)
        return {"taskId": task.id, "state": str(task.state), "owner": task.owner}

    def status(call: CallContext, args: StatusArgs) -> dict[str, Any]:
        _script_task(svc, args.taskId)
        out = eng.tasks.status(args.taskId, args.logCursor, args.logMaxBytes)
        result = out.get("result") or {}
        out["planId"] = result.get("planId")
        return out

    def cancel(call: CallContext, args: CancelArgs) -> dict[str, Any]:
        _script_task(svc, args.taskId)
        return eng.tasks.cancel(args.taskId, call.caller)

    return [
        ToolSpec(
            "pvf_script_help",
            "Script API help",
            "The .pvf.js script API; read before writing a script.",
            HelpArgs,
            help_,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_script_validate",
            "Check a script's syntax",
            "Syntax diagnostics of a .pvf.js program (never run).",
            ValidateArgs,
            validate,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_script_run",
            "Run a script",
            "Run a .pvf.js program in a sandbox; its writes become a plan. Returns a taskId.",
            RunArgs,
            run,
        ),
        ToolSpec(
            "pvf_script_status",
            "Script run status",
            "A run's state, log, error or result (planId).",
            StatusArgs,
            rehinted(status, task=True),
            read_only=True,
        ),
        ToolSpec(
            "pvf_script_cancel",
            "Cancel a script run",
            "Stop your own running script.",
            CancelArgs,
            rehinted(cancel, task=True),
        ),
    ]
