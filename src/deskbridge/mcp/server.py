"""Builds the low-level MCP `Server` that serves the App's tools, turning business errors into `isError` results.

We use the low-level server, not `MCPServer`, because our tools are described once as `ToolSpec`s (pydantic
models) and we want exact schemas, our own validation messages and one place that audits every call.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp_types.jsonrpc import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from deskbridge import __version__
from deskbridge.app import encode_result
from deskbridge.core.errors import BridgeError
from deskbridge.core.tools import (
    CallContext,
    ElicitationUnavailable,
    InputRequired,
    MissingClientCapability,
    ToolSpec,
)

if TYPE_CHECKING:
    from deskbridge.app import App

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "deskbridge lets you work on the person's open workspace safely. Read before you write: every read returns a "
    "revision; pass it back as expectedRevision when you change something. Writes may need the person's approval. "
    "Errors come back with a code, a message and a hint that says what to call next. Lists are paginated: follow "
    "nextCursor instead of asking for everything."
)


def mcp_tool(spec: ToolSpec) -> types.Tool:
    """The MCP description of a tool: schema from its pydantic model, honest annotations, and a title only when
    it says more than the name (a model pays for every token of tools/list on every turn)."""
    return types.Tool(
        name=spec.name,
        title=spec.title if title_adds_to_name(spec.title, spec.name) else None,
        description=spec.description,
        input_schema=spec.input_schema(),
        annotations=annotations_of(spec),
    )


_FILLER_WORDS = frozenset({"a", "an", "the", "of", "s"})


def title_adds_to_name(title: str, name: str) -> bool:
    """False when every word of `title` is already a word of `name` (articles aside; a word may stand for the
    name's plural or singular), e.g. "Save the archive" for `pvf_archive_save`. Clients display the name
    when a tool has no title (MCP spec 2025-06-18, Tool: "If not provided, the name should be used")."""
    named = {w for w in name.lower().split("_")}
    named |= {w.removesuffix("s") for w in named}
    words = [w for w in re.findall(r"[a-z0-9]+", title.lower()) if w not in _FILLER_WORDS]
    return not words or any(w not in named and w.removesuffix("s") not in named for w in words)


def annotations_of(spec: ToolSpec) -> types.ToolAnnotations:
    """Every hint that differs from the value a client assumes when it is absent (MCP spec, ToolAnnotations:
    readOnlyHint false, destructiveHint true, idempotentHint false, openWorldHint true): `openWorldHint: false`
    always (no tool of ours reaches beyond the workspace); `readOnlyHint: true` for a tool that only reads;
    for a tool that writes, `destructiveHint: false` when it only adds or stages, `idempotentHint: true` when
    repeating it changes nothing more. Destructive and idempotent of a read-only tool are meaningless (spec),
    so they are left out too."""
    if spec.read_only:
        return types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
    return types.ToolAnnotations(
        destructive_hint=None if spec.destructive else False,
        idempotent_hint=True if spec.idempotent else None,
        open_world_hint=False,
    )


def resources_of(app: App) -> list[types.Resource]:
    """Every concrete resource of the open workspace's templates (`resources/list`)."""
    return [
        types.Resource(
            uri=spec.uri(values),
            name=f"{spec.name}/{'/'.join(values.values())}" if values else spec.name,
            title=spec.title,
            description=spec.description,
            mime_type=spec.mime_of(values) if spec.mime_of is not None else spec.mime_type,
        )
        for spec in app.resource_specs()
        for values in spec.values()
    ]


def templates_of(app: App) -> list[types.ResourceTemplate]:
    """The open workspace's URI templates (`resources/templates/list`)."""
    return [
        types.ResourceTemplate(
            uri_template=spec.uri_template,
            name=spec.name,
            title=spec.title,
            description=spec.description,
            mime_type=spec.mime_type,
        )
        for spec in app.resource_specs()
    ]


def tool_result(
    payload: dict[str, Any], *, is_error: bool = False, text: str | None = None
) -> dict[str, Any]:
    """Both forms the spec asks for: structured content and the same JSON as text for older clients.

    The wire form of a `CallToolResult`, written as the dict the SDK validates and sends (it checks every result
    against the protocol's schema before it leaves): building the pydantic model first and dumping it again
    would serialise the payload twice more for nothing. `text` is the payload's JSON when the caller already
    encoded it (`App.invoke_encoded`), so it is encoded once per call.
    """
    if text is None:
        text = encode_result(payload)
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": payload,
        "isError": is_error,
        "resultType": "complete",
    }


def error_result(error: BridgeError) -> dict[str, Any]:
    return tool_result(error.to_dict(), is_error=True)


_BROWSER_WORDS = re.compile(
    r"web UI|browser|deskbridge editor|the URL `deskbridge serve` printed", re.IGNORECASE
)


def without_browser(error: BridgeError, tool: str, workspace: Path | None) -> BridgeError:
    """Over stdio there is no web UI to send the model to: say what works here instead."""
    if not _BROWSER_WORDS.search(error.hint):
        return error
    serve = f"`deskbridge serve {workspace}`" if workspace is not None else "`deskbridge serve PATH`"
    if str(error.code) == "APPROVAL_DECLINED":
        hint = (
            f"No one could approve {tool}: no browser is attached to this stdio session and the client cannot ask "
            f"the person (elicitation). Use a client that supports elicitation, or ask the person to run {serve} "
            f"and approve there; then call {tool} again."
        )
    else:
        hint = (
            f"This stdio session has no browser editor attached. Ask the person to run {serve} (the client then "
            f"shares its session), then call {tool} again."
        )
    return BridgeError(error.code, error.message, hint, error.data)


def _caller_of(ctx: ServerRequestContext[Any, Any]) -> tuple[str, str]:
    """(caller id, client name). The session id scopes dedup and task ownership; stdio is one caller."""
    client_name = "unknown"
    params = ctx.session.client_params
    if params is not None and params.client_info is not None:
        client_name = params.client_info.name
    elif ctx.meta is not None:
        info = (
            (ctx.meta.model_extra or {}).get("io.modelcontextprotocol/clientInfo")
            if hasattr(ctx.meta, "model_extra")
            else None
        )
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            client_name = info["name"]
    request = ctx.request
    session_id = None
    headers = getattr(request, "headers", None)
    if headers is not None:
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            return f"mcp:http:{client_name}", client_name
        return f"mcp:{session_id}", client_name
    return "mcp:stdio", client_name


APPROVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve"}},
    "required": ["approve"],
}


def _approved(result: types.ElicitResult) -> bool:
    # Only the boolean `true` the schema asks for is a yes: a client that sent its form field as the text
    # "false" or "no" had the change applied, since any non-empty string is truthy.
    return result.action == "accept" and (result.content or {}).get("approve") is True


def _elicitor(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams):
    """A yes/no question to the person through the client, or None when this client cannot be asked.

    Handshake-era sessions get a live `elicitation/create` request. 2026-07-28 requests have no back-channel: the
    question goes back as an InputRequiredResult and the client calls again carrying the answer, which is looked
    up here by a key derived from the question (so an answer only ever applies to the question it answered).
    """
    caps = ctx.session.client_capabilities
    if caps is None or caps.elicitation is None:
        return None
    if ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        answers = params.input_responses or {}

        async def ask_by_retry(question: str) -> bool | None:
            key = "approve-" + hashlib.sha256(question.encode()).hexdigest()[:16]
            answer = answers.get(key)
            if isinstance(answer, types.ElicitResult):
                return _approved(answer)
            raise InputRequired(key, question)

        return ask_by_retry
    if not ctx.session.can_send_request:
        return None

    async def ask(question: str) -> bool | None:
        try:
            result = await ctx.session.elicit_form(
                question, APPROVE_SCHEMA, related_request_id=ctx.request_id
            )
        except Exception as exc:  # no handler, an error or the client went away: the person was never asked
            logger.info("elicitation failed", exc_info=True)
            raise ElicitationUnavailable(str(exc)) from exc
        return _approved(result)

    return ask


_INPUT_REQUESTS: Any = None


def input_required(request: InputRequired) -> types.InputRequiredResult:
    """The 2026-07-28 answer for a tool that needs input: its requests (the approval question by default) and
    its `requestState`, which the SDK's `RequestStateBoundary` seals before it leaves."""
    global _INPUT_REQUESTS
    if request.requests is None:
        elicit = types.ElicitRequest(
            method="elicitation/create",
            params=types.ElicitRequestFormParams(
                message=request.question or "", requested_schema=APPROVE_SCHEMA
            ),
        )
        return types.InputRequiredResult(
            result_type="input_required", input_requests={str(request.key): elicit}
        )
    if _INPUT_REQUESTS is None:
        from pydantic import TypeAdapter

        _INPUT_REQUESTS = TypeAdapter(types.InputRequiredResult.model_fields["input_requests"].annotation)
    return types.InputRequiredResult(
        result_type="input_required",
        input_requests=_INPUT_REQUESTS.validate_python(request.requests),
        request_state=request.state,
    )


def _asker(ctx: ServerRequestContext[Any, Any]):
    """A live elicitation with any form, for handshake-era sessions whose client declared elicitation."""
    caps = ctx.session.client_capabilities
    if caps is None or caps.elicitation is None or ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None
    if not ctx.session.can_send_request:
        return None

    async def ask(message: str, schema: dict[str, Any]) -> dict[str, Any]:
        result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")

    return ask


def _json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    return (
        value.model_dump(by_alias=True, exclude_none=True, mode="json")
        if hasattr(value, "model_dump")
        else value
    )


ALIAS_CALLERS_MAX = 256
"""Sessions remembered as alias users (the oldest is forgotten first; it then only sees the short list)."""


def build_mcp_server(app: App, *, editor: bool = True) -> Server[Any]:
    """One low-level server per App; its tool list always reflects the currently open workspace.

    `editor=False` is the in-process stdio server: no browser editor is attached, so tools that drive one are
    neither listed nor callable, and hints do not send the model to a web UI that is not there.
    """

    def offered(spec: ToolSpec | None) -> bool:
        return spec is not None and not spec.person_only and (editor or not spec.requires_editor)

    # Aliases (Vex's `vex_*` / `vex.*` names) are answered but not listed: listing them would double the tools a
    # model reads (AGENT-TOKENS). A client that calls an unlisted name warns ("Tool … not listed by server",
    # the Python SDK's `ClientSession.validate_tool_result`, which re-lists first), so a session that used an
    # alias has the aliases listed from then on; every other session keeps the short list.
    alias_callers: OrderedDict[str, None] = OrderedDict()

    def alias_tools() -> list[types.Tool]:
        return [
            mcp_tool(spec).model_copy(
                update={
                    "name": alias,
                    "title": None,
                    "description": f"The Vex name of {spec.name}: the same tool.",
                }
            )
            for spec in app.tool_specs()
            if offered(spec)
            for alias in spec.aliases
        ]

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None):
        tools = [mcp_tool(spec) for spec in app.tool_specs() if offered(spec)]
        if alias_callers and _caller_of(ctx)[0] in alias_callers:
            tools += alias_tools()
        return types.ListToolsResult(tools=tools)

    def input_schema_of(name: str) -> dict[str, Any] | None:
        # The SDK checks Mcp-Param headers against the tool's schema on every call; answer from the registry
        # directly instead of letting it build the whole tools/list.
        spec = app.find_tool(name)
        return spec.input_schema(shared=True) if offered(spec) else None

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams):
        spec = app.find_tool(params.name)
        if spec is not None and spec.person_only:
            # Answered as for a tool that is not there (it is not listed): the decision is the person's.
            return error_result(
                BridgeError(
                    "NOT_FOUND",
                    f"unknown tool {params.name!r}",
                    hint="Call tools/list to see the tools of the open workspace.",
                )
            )
        if spec is not None and not editor and spec.requires_editor:
            return error_result(
                BridgeError(
                    "NOT_FOUND",
                    f"{params.name} drives the browser editor, which is not attached over stdio",
                    hint=f"Run `deskbridge serve {app.workspace.path if app.workspace else 'PATH'}` and open its "
                    "web UI to use the editor tools; the other tools work here.",
                )
            )
        caller, client_name = _caller_of(ctx)
        if (
            spec is not None and spec.name != params.name
        ):  # an alias: list the aliases to this caller from now on
            alias_callers[caller] = None
            alias_callers.move_to_end(caller)
            while len(alias_callers) > ALIAS_CALLERS_MAX:
                alias_callers.popitem(last=False)

        async def progress(done: float, total: float | None = None, message: str | None = None) -> None:
            await ctx.session.report_progress(done, total, message)

        caps = ctx.session.client_capabilities
        close = getattr(ctx, "close_sse_stream", None)
        call = CallContext(
            caller=caller,
            client_name=client_name,
            progress=progress,
            elicit=_elicitor(ctx, params),
            ask=_asker(ctx),
            input_responses=_json(params.input_responses) if params.input_responses else None,
            request_state=params.request_state,
            client_capabilities=_json(caps) if caps is not None else {},
            close_stream=close,
        )
        try:
            payload, text = await app.invoke_encoded(params.name, params.arguments or {}, call)
        except BridgeError as error:
            if not editor:
                error = without_browser(error, params.name, app.workspace.path if app.workspace else None)
            return error_result(error)
        except InputRequired as request:
            return input_required(request)
        except MissingClientCapability as missing:
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message=str(missing),
                data={"requiredCapabilities": {missing.capability: {}}},
            ) from None
        return tool_result(payload, text=text)

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ):
        return types.ListResourcesResult(resources=resources_of(app))

    async def list_resource_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ):
        return types.ListResourceTemplatesResult(resource_templates=templates_of(app))

    async def read_resource(ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams):
        found = app.read_resource(str(params.uri))
        if found is None:
            # MCP spec 2026-07-28 (changelog): an unknown resource is invalid params, with the URI in data.
            raise MCPError(
                code=INVALID_PARAMS, message=f"Unknown resource: {params.uri}", data={"uri": str(params.uri)}
            )
        text, mime = found
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=str(params.uri), mime_type=mime, text=text)]
        )

    server = Server(
        "deskbridge",
        version=__version__,
        title="deskbridge",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schema_of,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
    )
    # The SDK wraps every message in an OpenTelemetry span; with no tracer configured that is pure cost on the
    # hot path (~4 % of a small call), so it stays only when the process is set up for OpenTelemetry.
    if not any(k.startswith("OTEL_") for k in os.environ):
        server.middleware[:] = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
    # requestState leaves sealed (AES-GCM, bound to the call, 10-minute expiry) and comes back verified; a
    # tampered or foreign one is a -32602 before any tool sees it.
    server.middleware.append(
        RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience="deskbridge")
    )
    return server
