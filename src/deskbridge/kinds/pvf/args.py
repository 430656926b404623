"""Argument shapes the `pvf_*` tools share, defined once with short descriptions (AGENT-TOKENS: a model pays
for every token of tools/list on every turn; the long form of each rule is in docs/pvf-workspace.md).

`PvfArgs` lists an optional argument by its own type (`"type": "string"`, not `["string", "null"]`):
leaving it out is how a caller says "none"; an explicit null is still accepted. Unknown arguments are still
refused (`ToolArgs` forbids them, and the error lists the tool's arguments); the schema just does not spend
`additionalProperties: false` on every tool.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any

from pydantic import Field

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.tools import Handler, ToolArgs


def _omittable(schema: dict[str, Any]) -> dict[str, Any]:
    schema.pop(
        "additionalProperties", None
    )  # still refused (with the tool's argument names), just not listed
    for name, prop in list(schema.get("properties", {}).items()):
        options = prop.get("anyOf")
        if isinstance(options, list) and {"type": "null"} in options and len(options) == 2:
            other = next(o for o in options if o != {"type": "null"})
            prop = {**{k: v for k, v in prop.items() if k != "anyOf"}, **other}
        if prop.get("default", 0) is None:
            prop = {k: v for k, v in prop.items() if k != "default"}
        schema["properties"][name] = prop
    for sub in schema.get("$defs", {}).values():
        _omittable(sub)
    return schema


class PvfArgs(ToolArgs):
    """Base of the pvf tools' argument models (see the module docstring)."""

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        return _omittable(super().model_json_schema(*args, **kwargs))


def workspace_id() -> Any:
    return Field(description="From pvf_workspace_info.")


def revision(required: bool = False) -> Any:
    text = "Revision you read at."
    return Field(description=text) if required else Field(None, description=text)


def request_id() -> Any:
    return Field(None, description="Idempotency key.")


def cursor() -> Any:
    return Field(None, description="nextCursor to continue.")


def limit(default: int, most: int) -> Any:
    return Field(default, ge=1, le=most, description="Page size.")


def wait_seconds() -> Any:
    return Field(
        2.0,
        ge=0,
        le=60,
        description="Seconds to wait for the result, 0–60; work still running then goes on: follow the "
        "returned taskId with pvf_task_status.",
    )


def plan_id(prepare: str) -> Any:
    return Field(description=f"From {prepare}.")


def acknowledged() -> Any:
    return Field(default_factory=list, description="Warning ids you accept.")


_NO_PLAN = re.compile(r"^no (\w+ )?plan ")
_NO_TASK = re.compile(r"^no task ")


def rehinted(handler: Handler, *, plan: str | None = None, task: bool = False) -> Handler:
    """`handler` with the core's "no such plan/task" hint naming the pvf tool that makes a new one."""

    def fix(exc: BridgeError) -> None:
        if exc.code is not ErrorCode.NOT_FOUND:
            return
        if plan and _NO_PLAN.match(exc.message):
            exc.hint = (
                f"It expired (plans live 10 minutes), was applied or discarded; build it again with {plan}."
            )
        elif task and _NO_TASK.match(exc.message):
            exc.hint = (
                "It finished too long ago or never existed; pvf_workspace_info lists the running tasks."
            )

    if inspect.iscoroutinefunction(handler):

        @functools.wraps(handler)
        async def run_async(call: Any, args: Any) -> Any:
            try:
                return await handler(call, args)
            except BridgeError as exc:
                fix(exc)
                raise

        return run_async

    @functools.wraps(handler)
    def run(call: Any, args: Any) -> Any:
        try:
            return handler(call, args)
        except BridgeError as exc:
            fix(exc)
            raise

    return run
