"""A real MCP client session against `deskbridge serve` of a PVF workspace, with small helpers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from deskbridge.app import App
from deskbridge.testing import RunningServer, running_server


class Agent:
    """One MCP client session with small helpers."""

    def __init__(self, srv: RunningServer, client: Any) -> None:
        self.srv = srv
        self.client = client

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(name, args)
        assert not result.is_error, (name, result.structured_content)
        return result.structured_content

    async def fail(self, name: str, args: dict[str, Any], code: str) -> dict[str, Any]:
        result = await self.client.call_tool(name, args)
        assert result.is_error, (name, result.structured_content)
        assert result.structured_content["code"] == code, result.structured_content
        return result.structured_content

    async def ready(self) -> dict[str, Any]:
        for _ in range(300):
            info = await self.call("pvf_workspace_info", {})
            if info["open"] and info["lifecycle"] is None and (info["index"] or {}).get("state") == "ready":
                return info
            await asyncio.sleep(0.05)
        raise AssertionError(f"workspace never became ready: {info}")

    async def script_done(self, task_id: str) -> dict[str, Any]:
        """Poll `pvf_script_status` until the run `task_id` has ended; its last status."""
        loop = asyncio.get_running_loop()
        # A hang guard: generous for a shared machine, yet under pytest-timeout's 300 s, so a hang
        # fails with this message rather than with the timeout's bare traceback.
        deadline = loop.time() + 90
        while True:
            st = await self.call("pvf_script_status", {"taskId": task_id})
            if st["state"] in ("succeeded", "failed", "cancelled"):
                return st
            if loop.time() > deadline:
                raise AssertionError(f"the run never finished: {st}")
            await asyncio.sleep(0.05)

    async def run_script(self, ws: str, rev: int, source: str) -> dict[str, Any]:
        """`pvf_script_run` of `source` on revision `rev`, then its status once it has ended."""
        started = await self.call(
            "pvf_script_run", {"workspaceId": ws, "expectedRevision": rev, "source": source}
        )
        return await self.script_done(started["taskId"])

    async def execute_export(self, plan: dict[str, Any], output_parent: Path, **args: Any) -> dict[str, Any]:
        """`pvf_export_execute` of a prepared export plan into `output_parent`, every warning it has
        acknowledged; `args`: the call's other arguments (`outputName`, `selectedEntryKeys` …)."""
        return await self.call(
            "pvf_export_execute",
            {
                "exportPlanId": plan["exportPlanId"],
                "outputParent": str(output_parent),
                "acknowledgedWarningIds": [w["warningId"] for w in plan["warnings"]],
                **args,
            },
        )

    async def first_script(self, ws: str) -> str:
        hits = await self.call("pvf_search", {"workspaceId": ws, "query": ".equ", "limit": 1})
        return hits["hits"][0]["path"]

    async def prepare_append(self, ws: str, rev: int, path: str, append: str) -> dict[str, Any]:
        """The edit plan (`pvf_edit_prepare`) that adds `append` at the end of `path`'s text."""
        read = await self.call("pvf_read_file", {"workspaceId": ws, "path": path})
        return await self.call(
            "pvf_edit_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "edits": [{"path": path, "text": read["text"] + append}],
            },
        )

    async def recover(self, ws: str, rev: int) -> dict[str, Any]:
        """`pvf_recovery_prepare` on revision `rev`, then every change of its plan applied; the apply's result."""
        plan = await self.call("pvf_recovery_prepare", {"workspaceId": ws, "expectedRevision": rev})
        page = await self.call("pvf_plan_preview", {"planId": plan["planId"], "limit": 200})
        keys = [i["changeKey"] for i in page["items"]]
        return await self.call(
            "pvf_plan_apply", {"planId": plan["planId"], "changeKeys": keys, "expectedRevision": rev}
        )

    async def edit(self, ws: str, rev: int, path: str, append: str) -> dict[str, Any]:
        """`prepare_append`, then the plan applied whole (`pvf_plan_apply`)."""
        plan = await self.prepare_append(ws, rev, path, append)
        preview = await self.call("pvf_plan_preview", {"planId": plan["planId"]})
        keys = [i["changeKey"] for i in preview["items"]]
        return await self.call(
            "pvf_plan_apply", {"planId": plan["planId"], "changeKeys": keys, "expectedRevision": rev}
        )


@contextlib.asynccontextmanager
async def serve(path: Path | None, *, approvals: bool = False, **client: Any) -> AsyncIterator[Agent]:
    """`deskbridge serve` of `path` (None: the empty pvf workspace) and one MCP client (`client`: its options,
    e.g. an `elicitation_callback`). `approvals=False` switches `require_approval` off, as a person who
    approves in their client's own prompts does, so the flow tests need no one to answer; the approval tests
    pass True."""
    app = App.create()
    app.update_settings({"require_approval": approvals})
    if path is None:
        app.open(None, kind="pvf")
    async with running_server(path, app=app) as srv, srv.client(**client) as client_session:
        yield Agent(srv, client_session)


def service(agent: Agent) -> Any:
    return agent.srv.app.workspace.service  # type: ignore[union-attr]


@contextlib.asynccontextmanager
async def editor_stream(agent: Agent, http: Any, client_id: str) -> AsyncIterator[None]:
    """A browser editor as the platform sees it: registered with the draft barrier while its event stream
    `/api/events?editor=<client_id>` is open (web/app.py); answers go to `/api/editors/ack`."""
    drafts = service(agent).engine.drafts

    async def stream() -> None:
        url = f"{agent.srv.base_url}/api/events?editor={client_id}"
        async with http.stream("GET", url, timeout=None) as response:
            async for _line in response.aiter_lines():
                pass

    task = asyncio.create_task(stream())
    try:
        for _ in range(1000):
            if client_id in drafts.clients():
                break
            await asyncio.sleep(0.01)
        assert client_id in drafts.clients(), "the editor's event stream did not register it"
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
