"""Transport-neutral tool descriptions: what a kind offers, so MCP, the web API and the CLI stay thin.

A kind returns a list of `ToolSpec`s. The MCP layer turns each into an MCP tool (name, JSON schema from the
pydantic model, annotations) and calls `handler`; a `BridgeError` raised by the handler becomes an `isError`
result carrying `{code, message, hint}`.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

TOOL_NAME_PATTERN: Final = re.compile(r"^[a-z0-9_]{1,64}$")
"""Our tool names: lower snake case, prefixed by kind (`pvf_`, `md_`, `sage_`); a subset of SEP-986."""


class InputRequired(Exception):
    """A tool needs the person's answer through the client before it can finish (2026-07-28 clients, which have
    no back-channel: the transport returns the question, and the client calls again with the answer)."""

    def __init__(self, key: str, question: str) -> None:
        super().__init__(question)
        self.key = key
        self.question = question


class ToolArgs(BaseModel):
    """Base for tool argument models: unknown arguments are an error, not silently ignored."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class NoArgs(ToolArgs):
    """For tools that take no arguments."""


ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]


async def _no_progress(done: float, total: float | None = None, message: str | None = None) -> None:
    return None


@dataclass
class CallContext:
    """Who is calling and how to report progress; handed to every tool handler."""

    caller: str
    """Stable caller identity: 'ui', 'cli', or 'mcp:<session or client id>'. Scopes dedup and task ownership."""
    client_name: str = "unknown"
    """The client's self-reported name (for audit and approval dialogs only, never for authorization)."""
    progress: ProgressFn = _no_progress
    elicit: Callable[[str], Awaitable[bool | None]] | None = None
    """Ask the person yes/no through the MCP client (elicitation); None when the client cannot."""


Handler = Callable[[CallContext, Any], Awaitable[dict[str, Any]] | dict[str, Any]]


@dataclass(frozen=True)
class ToolSpec:
    """One operation a kind offers. Annotations are honest hints for clients deciding when to prompt."""

    name: str
    title: str
    description: str
    args: type[ToolArgs]
    handler: Handler
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    aliases: tuple[str, ...] = field(default=())
    """Extra names accepted on call (not listed), e.g. the Vex names for markdown tools."""
    needs_editor: bool | None = None
    """The tool drives the browser editor, so a transport without one (stdio) does not list it. Default: the
    kind's `<kind>_ui_*` tools."""

    @property
    def requires_editor(self) -> bool:
        if self.needs_editor is not None:
            return self.needs_editor
        return "_ui_" in self.name

    def __post_init__(self) -> None:
        if not TOOL_NAME_PATTERN.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match {TOOL_NAME_PATTERN.pattern}")

    def input_schema(self, *, shared: bool = False) -> dict[str, Any]:
        """JSON Schema 2020-12 of the arguments, without pydantic's `title` noise at the root.

        `shared=True` returns the cached schema itself (for hot read-only paths); never mutate it.
        """
        schema = _schema_of(self.args)
        return schema if shared else copy.deepcopy(schema)


@functools.cache
def _schema_of(args: type[ToolArgs]) -> dict[str, Any]:
    # Generating a schema costs ~1 ms; the SDK asks for a tool's schema on every 2026-era call, so build it once.
    schema = args.model_json_schema()
    schema.pop("title", None)
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema
