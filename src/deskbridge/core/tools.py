"""Transport-neutral tool descriptions: what a kind offers, so MCP, the web API and the CLI stay thin.

A kind returns a list of `ToolSpec`s. The MCP layer turns each into an MCP tool (name, JSON schema from the
pydantic model, annotations) and calls `handler`; a `BridgeError` raised by the handler becomes an `isError`
result carrying `{code, message, hint}`.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

TOOL_NAME_PATTERN: Final = re.compile(r"^[a-z0-9_]{1,64}$")
"""Our tool names: lower snake case, prefixed by kind (`pvf_`, `md_`, `sage_`); a subset of SEP-986."""


class InputRequired(Exception):
    """A tool needs input from the client before it can finish (2026-07-28 clients, which have no back-channel:
    the transport returns the requests, and the client calls again with `inputResponses`).

    `InputRequired(key, question)` is the yes/no approval question; `requests` carries any input requests as
    their JSON (`{"method": "elicitation/create", "params": {…}}`, `sampling/createMessage`, `roots/list`),
    and `state` the tool's own `requestState` for the next round (sealed by the transport, handed back to the
    tool verified as `CallContext.request_state`)."""

    def __init__(
        self,
        key: str | None = None,
        question: str | None = None,
        *,
        requests: dict[str, dict[str, Any]] | None = None,
        state: str | None = None,
    ) -> None:
        super().__init__(question or ", ".join(requests or {}))
        self.key = key
        self.question = question
        self.requests = requests
        self.state = state


class MissingClientCapability(Exception):
    """The call needs a client capability (`elicitation`, `sampling`, `roots`) the client did not declare; the
    transport answers with the protocol's MissingRequiredClientCapabilityError (-32021, HTTP 400)."""

    def __init__(self, capability: str) -> None:
        super().__init__(
            f"this call needs the client capability {capability!r}, which the client did not declare"
        )
        self.capability = capability


class ElicitationUnavailable(Exception):
    """The client was asked through elicitation but could not ask the person (no handler, an error, gone).

    Not a "no": the person never saw the question, so it must not be reported as their decision."""


class ToolArgs(BaseModel):
    """Base for tool argument models: unknown arguments are an error, not silently ignored."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class NoArgs(ToolArgs):
    """For tools that take no arguments."""


class AnyArgs(ToolArgs):
    """For a tool with a hand-written `schema`: the handler gets the arguments as they came."""

    model_config = ConfigDict(extra="allow")


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
    ask: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]] | None = None
    """A live `elicitation/create` with any form schema (handshake-era sessions only); returns the client's
    `{action, content}`. None on 2026-07-28, where a tool raises `InputRequired(requests=…)` instead."""
    input_responses: dict[str, Any] | None = None
    """The answers a 2026-07-28 client sent with this retry, as JSON, keyed like the requests."""
    request_state: str | None = None
    """The `state` of the tool's previous `InputRequired`, already verified by the transport."""
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    """What the client declared it can do (`elicitation`, `sampling`, `roots` …), as JSON."""
    close_stream: Callable[[], Awaitable[None]] | None = None
    """End this call's SSE stream now; the client resumes it with Last-Event-ID (SSE polling, SEP-1699)."""


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
    schema: dict[str, Any] | None = None
    """A hand-written input schema used as is (with `args=AnyArgs`), for schemas pydantic cannot express."""
    listed: bool = True
    """False: offered to the kind's own web UI (called through App.invoke like any tool, audited, approvals as
    declared) but left out of tools/list, so what a model reads stays within its token budget (AGENT-TOKENS)."""
    needs_editor: bool | None = None
    """The tool drives the browser editor, so a transport without one (stdio) does not list it. Default: the
    kind's `<kind>_ui_*` tools."""
    blocking: bool = True
    """A synchronous handler runs in a worker thread so that it cannot stall the event loop. `False` declares a
    quick one — in-memory work or one small bounded read — that runs on the loop itself: for such a call the
    thread round trip (queue, wake-up, GIL hand-over) costs more CPU than the work (MCP-LAT). Async handlers
    always run on the loop."""
    operation: str | None = None
    """The approval operation the tool performs (`edit`, `save`, `save_as`, `export` …, the names of the
    `approval_rules` setting). When set, `App.invoke` asks the person before the handler runs, for MCP callers,
    whenever `require_approval`, the setting's per-operation overrides and the kind's `approval_defaults` say
    so. None: the tool needs no approval (or, for a change known only inside the handler, asks there)."""
    approval_summary: Callable[[Any], Any] | None = None
    """The approval question from the validated arguments (default: the title): one line, or a
    `core.policy.ApprovalText` with the diff to show (markdown's edits), or None when the call changes
    nothing (nothing is asked). It may raise a `BridgeError` (e.g. an unknown plan, a stale revision), so a
    call that cannot succeed is refused before anyone is asked."""
    person_only: bool = False
    """The person's own decision from the editor (e.g. reload or keep a file another program changed): run
    through `App.invoke` like any call (validated, audited once), but neither listed to nor callable by MCP
    clients — an agent must not choose between the person's text and someone else's."""

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
        schema = self.schema if self.schema is not None else _schema_of(self.args)
        return schema if shared else copy.deepcopy(schema)


@functools.cache
def _schema_of(args: type[ToolArgs]) -> dict[str, Any]:
    # Generating a schema costs ~1 ms; the SDK asks for a tool's schema on every 2026-era call, so build it once.
    schema = compact_schema(args.model_json_schema())
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


_SUBSCHEMA_KEYS: Final = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_SUBSCHEMA_LISTS: Final = ("anyOf", "oneOf", "allOf", "prefixItems")


def compact_schema(schema: Any, *, required: bool = True) -> Any:
    """The same JSON Schema with less to read (a model pays for every token of tools/list on every turn):

    * pydantic's `title`s go (`"title": "Docid"` says nothing the property name does not);
    * `anyOf: [X, {"type": "null"}]` of an optional argument becomes X with `"type": [t, "null"]`;
    * `"default": null` of an argument that may be left out goes (leaving it out means exactly that).

    Property *names* are never touched, so a property called `title` stays.
    """
    if isinstance(schema, list):
        return [compact_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
            needed = set(schema.get("required", ())) if key == "properties" else set()
            out[key] = {
                name: compact_schema(sub, required=name in needed or key != "properties")
                for name, sub in value.items()
            }
        elif key in _SUBSCHEMA_KEYS:
            out[key] = compact_schema(value)
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [compact_schema(item) for item in value]
        else:
            out[key] = value
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        other = options[0] if options[1] == {"type": "null"} else options[1]
        if (
            isinstance(other, dict)
            and isinstance(other.get("type"), str)
            and not (set(other) & set(out) - {"anyOf"})
        ):
            del out["anyOf"]
            out = {**other, "type": [other["type"], "null"], **out}
    if not required and "default" in out and out["default"] is None:
        del out["default"]
    return out


@dataclass(frozen=True)
class ResourceSpec:
    """Read-only content a kind offers as MCP resources: one URI template (RFC 6570 level 1, `{name}`
    variables, each matching one path segment) with the concrete URIs it lists and a reader.

    The MCP layer lists `uris()` in `resources/list`, the template in `resources/templates/list`, and
    answers `resources/read` with `read(variables)` → `(text, mimeType)`; an unknown URI is the protocol's
    invalid-params error (`-32602`, MCP spec 2026-07-28)."""

    uri_template: str
    name: str
    description: str
    read: Callable[[dict[str, str]], tuple[str, str]]
    """The content for the variables of a matching URI; raises `KeyError` when nothing is there."""
    values: Callable[[], list[dict[str, str]]] = lambda: []
    """The variables of every concrete resource to list."""
    mime_type: str | None = None
    """The template's MIME type, when all its resources share one."""
    mime_of: Callable[[dict[str, str]], str | None] | None = None
    """The MIME type of one listed resource, when they differ (default: `mime_type`)."""
    title: str | None = None

    def uri(self, variables: dict[str, str]) -> str:
        return _TEMPLATE_VAR.sub(lambda m: variables[m.group(1)], self.uri_template)

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables when `uri` is one of this template's, else None."""
        pattern = "".join(
            f"(?P<{part[1:-1]}>[^/?#]+)" if _TEMPLATE_VAR.fullmatch(part) else re.escape(part)
            for part in _TEMPLATE_SPLIT.split(self.uri_template)
            if part
        )
        found = re.fullmatch(pattern, uri)
        return found.groupdict() if found else None


_TEMPLATE_VAR: Final = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_TEMPLATE_SPLIT: Final = re.compile(r"(\{[A-Za-z_][A-Za-z0-9_]*\})")


# -- hints that name the next tool ----------------------------------------------------------------------------
# A handler that knows the next call says it in its own hint. When it raised with the code's default hint, the
# platform fills in the kind's tool for that role instead of a generic "list or search first": found by name,
# so a new kind gets it by naming its tools the way the others do.

_ROLE_PATTERNS: Final[dict[str, tuple[str, ...]]] = {
    "status": ("_get_app_status", "_get_status", "_workspace_info", "_status"),
    "list": (
        "_list_open_documents",
        "_find_asset",
        "_search",
        "_list_dir",
        "_list_assets_by_type",
        "_status",
    ),
    "read": ("_get_current_document", "_read_file", "_workspace_info", "_get_status", "_status"),
}

_ROLE_HINTS: Final[dict[str, tuple[str, str]]] = {
    "NOT_FOUND": ("list", "Nothing matches; call {role} to get a valid name or id, then retry {tool}."),
    "STALE_WORKSPACE": (
        "read",
        "The workspace changed since you read it; call {role} for the current revision, then retry {tool}.",
    ),
    "EXPECTED_TEXT_MISMATCH": (
        "read",
        "The text there is not what you expected; call {role} to read it again, then retry {tool} with the fresh text.",
    ),
    "SOURCE_CHANGED": (
        "read",
        "Another program changed the file on disk; call {role} to see the current state before you retry {tool}.",
    ),
    "NOT_READY": (
        "status",
        "The workspace is still loading or busy; call {role} and retry {tool} when it says ready.",
    ),
    "INDEX_STALE": (
        "status",
        "The index is older than the files; call {role} to watch the re-index, then retry {tool}.",
    ),
    "TASK_BUSY": ("status", "Another write task is running; call {role} to see it, then retry {tool}."),
    "PLAN_PENDING": (
        "status",
        "A change plan is waiting; call {role} to see it, apply or discard it, then retry {tool}.",
    ),
    "UNSAVED_CHANGES": (
        "status",
        "There are unsaved changes; call {role} to see them, save or pass a dirtyPolicy, then retry {tool}.",
    ),
    "INVALID_ARGUMENT": ("self", "Correct the argument as the message says and call {tool} again."),
    "LIMIT_EXCEEDED": (
        "self",
        "Ask for less (a filter, a smaller limit, or follow nextCursor) and call {tool} again.",
    ),
    "INTERNAL": (
        "self",
        "An unexpected internal error; retry {tool} once, and report it if it happens again.",
    ),
    "REQUEST_CONFLICT": (
        "self",
        "This requestId was already used with other parameters; call {tool} with a new requestId.",
    ),
}


def tool_for_role(role: str, tool: str, names: list[str]) -> str | None:
    """The kind's tool for `status`, `list` or `read` (same prefix as `tool`), or None."""
    prefix = tool.split("_", 1)[0] + "_"
    own = [n for n in names if n.startswith(prefix)]
    for suffix in _ROLE_PATTERNS.get(role, ()):
        # The shortest name with the suffix is the kind's general tool: `pvf_search`, not the more special
        # `pvf_annotation_search` registered before it (which once answered a missing path of pvf_read_file).
        found = [name for name in own if name.endswith(suffix)]
        if found:
            return min(found, key=len)
    return None


def next_step_hint(code: str, tool: str, names: list[str]) -> str | None:
    """A hint naming the next call for an error raised with its code's default hint (None: keep the default)."""
    entry = _ROLE_HINTS.get(code)
    if entry is None:
        return None
    role, template = entry
    target = tool if role == "self" else tool_for_role(role, tool, names)
    if target is None:
        return None
    return template.format(role=target, tool=tool)


def schema_hint(spec: ToolSpec, failed: Iterable[str] = ()) -> str:
    """For arguments that do not validate: the tool's own argument names, so the model can fix the call, and
    what the schema says of each argument that failed (where to get a value, what to call instead)."""
    schema = spec.input_schema(shared=True)
    properties = schema.get("properties", {})
    names = list(properties)
    required = schema.get("required", [])
    takes = f"it takes {', '.join(names)}" if names else "it takes no arguments"
    needs = f" (required: {', '.join(required)})" if required else ""
    notes = [
        f" {name}: {desc.rstrip('.')}."
        for name in dict.fromkeys(failed)
        if isinstance(desc := properties.get(name, {}).get("description"), str) and desc
    ]
    return f"Call {spec.name} again with valid arguments: {takes}{needs}.{''.join(notes)}"
