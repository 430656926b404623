"""Composes one App: the open workspace plus the shared services; the web UI, MCP and CLI all use this instance."""

from __future__ import annotations

import inspect
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import ValidationError

from deskbridge.core.audit import AUDIT_TARGET, Approval
from deskbridge.core.errors import DEFAULT_HINTS, BridgeError, ErrorCode, internal
from deskbridge.core.limits import RESPONSE_MAX_BYTES
from deskbridge.core.policy import LAST_APPROVAL, ApprovalRequest, ApprovalText, ask_for_tool
from deskbridge.core.requests import RequestLog
from deskbridge.core.tools import (
    CallContext,
    InputRequired,
    MissingClientCapability,
    ResourceSpec,
    ToolSpec,
    next_step_hint,
    schema_hint,
)
from deskbridge.kinds.base import KindServices, KindWorkspace, find_kind
from deskbridge.settings import (
    Dirs,
    Settings,
    deskbridge_dirs,
    load_or_create_token,
    load_settings,
    private_dir,
)

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from deskbridge.core.audit import AuditLog
    from deskbridge.core.events import EventBus
    from deskbridge.core.policy import ApprovalBroker
    from deskbridge.web.security import SecurityPolicy


def encode_result(result: Any) -> str:
    """A tool result as the compact JSON text MCP sends (and the response cap measures): non-ASCII kept as it is,
    no spaces, and a value JSON has no form for (a path, a date) written as its `str`."""
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str)


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


@dataclass
class App:
    """The running program: settings, services and at most one open workspace."""

    settings: Settings
    dirs: Dirs
    events: EventBus
    audit: AuditLog
    approvals: ApprovalBroker
    token: str
    ui_secret: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    workspace: KindWorkspace | None = None
    security_policy: SecurityPolicy | None = None
    """The HTTP security policy once `serve` built it, so a token rotation takes effect at once."""
    listen_port: int | None = None
    """The port this process really serves on (set by `build_web_app`); the `port` setting is only what the next
    `serve` asks for, so a client config built from it may point at nothing (`--port`, port 0, a changed setting)."""
    requests: RequestLog = field(default_factory=RequestLog)
    """requestId de-duplication for every tool whose arguments carry one (per caller, outlives workspaces)."""
    _tools: dict[str, ToolSpec] = field(default_factory=dict)
    _resources: list[ResourceSpec] = field(default_factory=list)

    # -- composition ---------------------------------------------------------------------------------------

    @classmethod
    def create(cls, *, dirs: Dirs | None = None, settings: Settings | None = None) -> App:
        from deskbridge.core.audit import AuditLog
        from deskbridge.core.events import EventBus
        from deskbridge.core.policy import ApprovalBroker

        dirs = dirs or deskbridge_dirs()
        settings = settings or load_settings(dirs)
        events = EventBus()
        audit_path = dirs.data / "audit.jsonl" if settings.audit_log else None
        if audit_path is not None or dirs.data.exists():
            private_dir(dirs.data)  # owner-only: the audit log and the demo workspace live there
        audit = AuditLog(path=audit_path)
        # Read on every approval, so the settings panel's choice applies at once (settings change in place).
        approvals = ApprovalBroker(events, client_allowed=lambda: settings.approvals_via_client)
        return cls(
            settings=settings,
            dirs=dirs,
            events=events,
            audit=audit,
            approvals=approvals,
            token=load_or_create_token(dirs),
        )

    def open(
        self, path: Path | None, *, kind: str | None = None, options: dict[str, Any] | None = None
    ) -> KindWorkspace:
        """Open a workspace of the detected (or named) kind; its tools replace the previous ones.

        `path=None` with a `kind` opens that kind's empty workspace (PVF: open an archive later with a tool).
        """
        if path is None:
            if kind is None:
                raise BridgeError(ErrorCode.INVALID_ARGUMENT, "an empty workspace needs a kind")
            entry = find_kind(Path(), kind)
            if not entry.empty_ok:
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"the {entry.name} kind needs a path to open",
                    hint=f"Pass the {entry.description} to serve.",
                )
        else:
            path = path.expanduser().resolve()
            entry = find_kind(path, kind)
        return self.adopt(entry.open(path, self.kind_services(options)))

    def open_at_start(
        self, path: Path | None, *, kind: str | None = None, options: dict[str, Any] | None = None
    ) -> None:
        """What `deskbridge serve` and `deskbridge mcp` open when they start: `path`, or with no path the empty
        workspace of a kind that can start empty (pvf: `pvf_archive_open` opens an archive later)."""
        if path is not None:
            self.open(path, kind=kind, options=options)
        elif kind is not None and find_kind(Path(), kind).empty_ok:
            self.open(None, kind=kind, options=options)

    def kind_services(self, options: dict[str, Any] | None = None) -> KindServices:
        """The shared services a kind's workspace is opened with."""
        return KindServices(
            settings=self.settings,
            dirs=self.dirs,
            events=self.events,
            audit=self.audit,
            approvals=self.approvals,
            options=dict(options or {}),
            invoke=self.invoke,
        )

    def adopt(self, workspace: KindWorkspace) -> KindWorkspace:
        """Make an opened workspace the current one; its tools replace the previous ones."""
        self.workspace = workspace
        self._tools = {}
        for spec in workspace.tools():
            for name in (spec.name, *spec.aliases):
                if name in self._tools:
                    raise ValueError(f"tool name {name!r} registered twice")
                self._tools[name] = spec
        offered = getattr(workspace, "resources", None)  # optional: a kind that offers MCP resources
        self._resources = list(offered()) if callable(offered) else []
        self.events.publish("status", {"kind": workspace.kind, "path": str(workspace.path)})
        return workspace

    async def start(self) -> None:
        if self.workspace is not None:
            await self.workspace.start()

    async def stop(self) -> None:
        if self.workspace is not None:
            await self.workspace.stop()

    # -- tools -----------------------------------------------------------------------------------------------

    def tool_specs(self) -> list[ToolSpec]:
        """Listed tools (aliases and `listed=False` UI tools are accepted on call but not listed), in a stable order."""
        seen: dict[str, ToolSpec] = {}
        for spec in self._tools.values():
            if spec.listed:
                seen.setdefault(spec.name, spec)
        return sorted(seen.values(), key=lambda s: s.name)

    def find_tool(self, name: str) -> ToolSpec | None:
        return self._tools.get(name)

    # -- resources -------------------------------------------------------------------------------------------

    def resource_specs(self) -> list[ResourceSpec]:
        """The open workspace's resource templates (one registry for every transport)."""
        return list(self._resources)

    def read_resource(self, uri: str) -> tuple[str, str] | None:
        """`(text, mimeType)` of the resource at `uri`, or None when no template of the workspace has it."""
        for spec in self._resources:
            variables = spec.match(uri)
            if variables is None:
                continue
            try:
                return spec.read(variables)
            except KeyError:
                return None
        return None

    async def invoke(self, name: str, arguments: dict[str, Any], call: CallContext) -> dict[str, Any]:
        """Validate, run and audit one tool call. Every transport comes through here."""
        result, _ = await self.invoke_encoded(name, arguments, call)
        return result

    async def invoke_encoded(
        self, name: str, arguments: dict[str, Any], call: CallContext
    ) -> tuple[dict[str, Any], str]:
        """`invoke`, and the result's JSON (`encode_result`): encoded once, measured against the response cap
        here and sent as the MCP text content as it is."""
        started = time.perf_counter()
        spec = self.find_tool(name)
        outcome = "ok"
        notice: dict[str, Any] | None = None
        LAST_APPROVAL.set(None)
        AUDIT_TARGET.set(None)
        try:
            if spec is None:
                if self.workspace is None:
                    raise BridgeError(
                        ErrorCode.NO_WORKSPACE,
                        f"unknown tool {name!r}: no workspace is open",
                        hint="Start deskbridge with what to work on (deskbridge serve PATH or deskbridge mcp "
                        "PATH), or with --kind pvf to open an archive later with pvf_archive_open.",
                    )
                names = [s.name for s in self.tool_specs()]
                status = next((n for n in names if n.endswith(("_status", "_workspace_info"))), None)
                raise BridgeError(
                    ErrorCode.NOT_FOUND,
                    f"unknown tool {name!r}",
                    hint=f"Call {status} to see the open workspace, or tools/list for its tools."
                    if status
                    else "Call tools/list to see the tools of the open workspace.",
                )
            notice = await self._outside_change(name)
            try:
                args = spec.args.model_validate(arguments)
            except ValidationError as exc:
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT,
                    _validation_message(exc),
                    hint=schema_hint(spec, (str(e["loc"][0]) for e in exc.errors() if e["loc"])),
                ) from exc
            try:
                request_id = getattr(args, "requestId", None)
                if request_id is not None:
                    # One rule for every tool (seed "超时、重试与释放"): same caller + id + arguments → the first
                    # result; other arguments → REQUEST_CONFLICT. The id itself is not part of the fingerprint.
                    params = {"tool": name, **{k: v for k, v in arguments.items() if k != "requestId"}}
                    result = await self.requests.run(
                        call.caller, request_id, params, lambda: self._approved_run(spec, name, call, args)
                    )
                else:
                    result = await self._approved_run(spec, name, call, args)
            except (BridgeError, InputRequired, MissingClientCapability):
                raise
            except Exception as exc:  # a bug, not the caller's fault: say so, keep the server alive
                raise internal(exc) from exc
            approval = LAST_APPROVAL.get()
            if approval is not None and isinstance(result, dict) and "approval" not in result:
                # Which path approved (browser / client elicitation) travels with the result, as in the audit.
                result = {**result, "approval": approval.to_dict()}
            if notice is not None and isinstance(result, dict) and result.get("externalChange") is None:
                result = {**result, "externalChange": notice}
            text = encode_result(result)
            size = len(text)
            if size > RESPONSE_MAX_BYTES:
                raise BridgeError(
                    ErrorCode.LIMIT_EXCEEDED,
                    f"the result of {name} is {size} bytes, over the {RESPONSE_MAX_BYTES}-byte cap",
                    hint="Ask for less: use a smaller limit, a filter, or follow the cursor.",
                )
            return result, text
        except BridgeError as error:
            outcome = str(error.code)
            if notice is not None:
                error.data.setdefault("externalChange", notice)
            names = [s.name for s in self.tool_specs()]
            if error.hint == DEFAULT_HINTS[error.code]:  # the raise site did not say what to do next: name it
                error.hint = next_step_hint(str(error.code), name, names) or error.hint
            elif not any(n in error.hint for n in names):
                if error.hint.endswith(("then retry.", "and retry.")):
                    error.hint = error.hint[:-1] + f" {name}."  # "…, then retry." → "…, then retry md_x."
                elif error.code in (ErrorCode.INVALID_ARGUMENT, ErrorCode.LIMIT_EXCEEDED):
                    error.hint = (
                        f"{error.hint} Then call {name} again."  # the next call is this one, corrected
                    )
            raise
        except InputRequired:
            outcome = "INPUT_REQUIRED"
            raise
        finally:
            approval = LAST_APPROVAL.get()
            self.audit.record(
                caller=call.caller,
                client=call.client_name,
                tool=name,
                approval=approval.for_audit if approval is not None else Approval.NONE,
                approved_via=None if approval is None or approval.via is None else str(approval.via),
                target=AUDIT_TARGET.get() or _target_of(arguments) or "",
                outcome=outcome,
                duration_ms=(time.perf_counter() - started) * 1000,
                arg_names=arguments.keys(),
            )

    async def _outside_change(self, tool: str) -> dict[str, Any] | None:
        """The open workspace's answer to "has another program changed what is open on disk?", asked before
        every tool call (`KindWorkspace.outside_change`); a failing check never fails the call."""
        check = getattr(self.workspace, "outside_change", None)
        if check is None:
            return None
        try:
            return await check(tool)
        except Exception:
            log.exception("checking the workspace's files for outside changes failed")
            return None

    async def _approved_run(self, spec: ToolSpec, name: str, call: CallContext, args: Any) -> dict[str, Any]:
        """Ask the person first when the tool declares an approval operation and the rules want it (inside the
        requestId de-duplication, so a replayed result is not asked for again and a "no" is not remembered).
        The browser and the CLI are the person themselves: only MCP callers are asked."""
        if spec.operation is not None and call.caller.startswith("mcp:"):

            def request() -> ApprovalRequest | None:
                summary = spec.approval_summary(args) if spec.approval_summary is not None else spec.title
                if summary is None:  # the call changes nothing: nothing to ask
                    return None
                text = summary if isinstance(summary, ApprovalText) else ApprovalText(summary)
                where = self.workspace.path if self.workspace is not None else None
                return ApprovalRequest(
                    caller=call.caller,
                    client=call.client_name,
                    tool=name,
                    target=text.target
                    or _target_of(args.model_dump(by_alias=True))
                    or (str(where) if where else ""),
                    summary=text.summary,
                    diff=text.diff,
                    operation=spec.operation,
                )

            asking = ask_for_tool(
                self.approvals,
                operation=spec.operation,
                defaults=getattr(self.workspace, "approval_defaults", {}),
                require_approval=self.settings.require_approval,
                overrides=self.settings.approval_rules,
                request=request,
                elicit=call.elicit,
            )
            if asking is not None:
                await asking
        return await self._run_handler(spec, call, args)

    @staticmethod
    async def _run_handler(spec: ToolSpec, call: CallContext, args: Any) -> dict[str, Any]:
        if inspect.iscoroutinefunction(spec.handler):
            return await spec.handler(call, args)
        if spec.blocking:
            result = await anyio.to_thread.run_sync(spec.handler, call, args)
        else:
            result = spec.handler(call, args)
        if inspect.isawaitable(result):
            result = await result
        return result

    def update_settings(self, changes: dict[str, Any]) -> Settings:
        """Validate, persist and apply changed settings in place, so every holder of `settings` sees them at once."""
        from pydantic import ValidationError

        from deskbridge.settings import save_settings

        try:
            fresh = Settings.model_validate(self.settings.model_dump(by_alias=True) | changes)
        except ValidationError as exc:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                _validation_message(exc),
                hint="`deskbridge config show` lists the settings and their current values.",
            ) from exc
        save_settings(fresh, self.dirs)
        for name in Settings.model_fields:
            setattr(self.settings, name, getattr(fresh, name))
        self.events.publish("settings", self.settings.model_dump(by_alias=True))
        return self.settings

    def _mcp_state(self) -> str:
        """What the settings panel shows: running, stopped (switched off) or token_missing (file gone)."""
        if not self.settings.mcp_enabled:
            return "stopped"
        if not self.dirs.token_file.exists():
            return "token_missing"
        return "running"

    def rotate_token(self) -> str:
        """A new MCP token, effective immediately for new requests; clients must be given the new one."""
        self.token = load_or_create_token(self.dirs, rotate=True)
        if self.security_policy is not None:
            self.security_policy.mcp_token = self.token
        self.events.publish("settings", {"tokenRotated": True})
        return self.token

    def mcp_url(self) -> str:
        """The MCP endpoint a client on this computer can connect to now (the configured port if not serving)."""
        return f"http://127.0.0.1:{self.listen_port or self.settings.port}/mcp"

    def status(self) -> dict[str, Any]:
        mcp: dict[str, Any] = {"state": self._mcp_state(), "configuredPort": self.settings.port}
        if self.listen_port is not None:
            # What "Copy client config" must use; `restartNeeded` when the setting names another port.
            mcp |= {
                "port": self.listen_port,
                "url": self.mcp_url(),
                "restartNeeded": self.listen_port != self.settings.port,
            }
        return {
            "workspace": self.workspace.status() if self.workspace is not None else None,
            "mcp": mcp,
            "mcpEnabled": self.settings.mcp_enabled,
            "requireApproval": self.settings.require_approval,
            "tools": len(self.tool_specs()),
        }


_TARGET_KEYS = ("path", "docId", "target", "id", "name", "type")


def _target_of(arguments: dict[str, Any]) -> str | None:
    """What the call was about, for the audit: a path or id, never content."""
    for key in _TARGET_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and len(value) <= 512:
            return value
    return None
