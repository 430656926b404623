"""Business errors with a closed list of codes, each carrying a hint that says what to call next.

Transports turn a `BridgeError` into their own shape (an MCP `isError` result, a JSON body with an HTTP
status, a CLI `error:`/`help:` pair); nothing below the transports knows about those shapes.
"""

from __future__ import annotations

from enum import StrEnum

TYPE_CHECKING = False  # `typing` is not loaded on the short paths that only raise or catch these
if TYPE_CHECKING:
    from typing import Any, Final


class ErrorCode(StrEnum):
    """Every code a caller can see. Adding one means adding its default hint below."""

    NOT_READY = "NOT_READY"
    STALE_WORKSPACE = "STALE_WORKSPACE"
    STALE_PLAN = "STALE_PLAN"
    STALE_EXPORT = "STALE_EXPORT"
    UNSAVED_CHANGES = "UNSAVED_CHANGES"
    UI_DRAFT_PENDING = "UI_DRAFT_PENDING"
    UI_NOT_READY = "UI_NOT_READY"
    TASK_BUSY = "TASK_BUSY"
    PLAN_PENDING = "PLAN_PENDING"
    EXPORT_PLAN_PENDING = "EXPORT_PLAN_PENDING"
    SAVE_AS_REQUIRED = "SAVE_AS_REQUIRED"
    SOURCE_CHANGED = "SOURCE_CHANGED"
    SAME_AS_SOURCE = "SAME_AS_SOURCE"
    TARGET_EXISTS = "TARGET_EXISTS"
    TARGET_CHANGED = "TARGET_CHANGED"
    UNSUPPORTED_CHANGE = "UNSUPPORTED_CHANGE"
    REQUEST_CONFLICT = "REQUEST_CONFLICT"
    ACCESS_DENIED = "ACCESS_DENIED"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    APPROVAL_DECLINED = "APPROVAL_DECLINED"
    NO_WORKSPACE = "NO_WORKSPACE"
    EXPECTED_TEXT_MISMATCH = "EXPECTED_TEXT_MISMATCH"
    # Format-specific codes (raised by kinds; listed here so the list stays closed and documented).
    PVF_CORRUPT = "PVF_CORRUPT"
    UNSUPPORTED_VARIANT = "UNSUPPORTED_VARIANT"
    KEY_REQUIRED = "KEY_REQUIRED"
    ENCODING_MISMATCH = "ENCODING_MISMATCH"
    SCRIPT_SYNTAX = "SCRIPT_SYNTAX"
    INDEX_STALE = "INDEX_STALE"
    INTERNAL = "INTERNAL"


DEFAULT_HINTS: Final[dict[ErrorCode, str]] = {
    ErrorCode.NOT_READY: "The workspace is still loading or indexing; call the status tool and retry when it says ready.",
    ErrorCode.STALE_WORKSPACE: "The workspace changed since you read it; read it again to get the current revision, then retry.",
    ErrorCode.STALE_PLAN: "The workspace changed after this plan was built; build the plan again and apply the new one.",
    ErrorCode.STALE_EXPORT: "The workspace changed after this export was prepared; prepare the export again.",
    ErrorCode.UNSAVED_CHANGES: "The workspace has unsaved changes; save first, or retry with dirtyPolicy 'save' or 'discard'.",
    ErrorCode.UI_DRAFT_PENDING: "The person has unsynced edits in the editor; ask them to finish or discard the draft, then retry.",
    ErrorCode.UI_NOT_READY: "The editor did not answer in time; make sure the browser tab is open and responsive, then retry.",
    ErrorCode.TASK_BUSY: "Another write task is running; wait for it (task status) or cancel it if it is yours, then retry.",
    ErrorCode.PLAN_PENDING: "A change plan is waiting; apply or discard it before starting another write.",
    ErrorCode.EXPORT_PLAN_PENDING: "An export plan is waiting; run or discard it before preparing another.",
    ErrorCode.SAVE_AS_REQUIRED: "This workspace has no source file; use save-as with a target path.",
    ErrorCode.SOURCE_CHANGED: "The file on disk was changed by another program; reload it, or save a copy elsewhere.",
    ErrorCode.SAME_AS_SOURCE: "The target is the open file itself; use save instead of save-as.",
    ErrorCode.TARGET_EXISTS: "The target already exists; choose another name, or pass overwrite with the target identity you observed.",
    ErrorCode.TARGET_CHANGED: "The target changed since you observed it; look at it again and retry with its new identity.",
    ErrorCode.UNSUPPORTED_CHANGE: "This change cannot be applied here; remove it from the selection and apply the rest.",
    ErrorCode.REQUEST_CONFLICT: "This requestId was already used with different parameters; use a new requestId.",
    ErrorCode.ACCESS_DENIED: "The path or operation is outside the allowed scope; stay inside the workspace or change the access scope.",
    ErrorCode.INVALID_ARGUMENT: "An argument is invalid; correct it as the message says and retry.",
    ErrorCode.NOT_FOUND: "Nothing matches; list or search first to get a valid name or id.",
    ErrorCode.LIMIT_EXCEEDED: "The request is over a limit; narrow it (filter, smaller page, fewer items) and retry.",
    ErrorCode.APPROVAL_DECLINED: "The person declined or did not answer in time; do not retry the same change without asking them.",
    ErrorCode.NO_WORKSPACE: "No workspace is open; open one first.",
    ErrorCode.EXPECTED_TEXT_MISMATCH: "The text at that range is not what you expected; read the range again and retry with fresh text.",
    ErrorCode.PVF_CORRUPT: "The archive is damaged at the offset given; restore it from a backup or a clean copy.",
    ErrorCode.UNSUPPORTED_VARIANT: "This archive variant is not supported; check the family and variant named in the message.",
    ErrorCode.KEY_REQUIRED: "This archive needs key material from the game client; pass the key file (see `deskbridge pvf --help`).",
    ErrorCode.ENCODING_MISMATCH: "The text encoding looks wrong; pick another encoding for this archive.",
    ErrorCode.SCRIPT_SYNTAX: "The script text does not parse; fix it at the line and column given.",
    ErrorCode.INDEX_STALE: "The index is older than the files; wait for the re-index or pass allowStale true.",
    ErrorCode.INTERNAL: "An unexpected internal error; retry once, and report it if it happens again.",
}


class BridgeError(Exception):
    """A business error a caller can act on: a code from the closed list, a message, a hint and data.

    `data` carries machine-readable details (current revision, offsets, candidate names); it must never
    contain file content beyond a short excerpt, nor any secret.
    """

    def __init__(
        self,
        code: ErrorCode | str,
        message: str,
        hint: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        self.code = ErrorCode(code)
        self.message = message
        self.hint = hint if hint is not None else DEFAULT_HINTS[self.code]
        self.data = dict(data or {})
        super().__init__(f"{self.code}: {message}")

    def to_dict(self) -> dict[str, Any]:
        """The shape every transport sends: `{code, message, hint}` plus `data` when there is any."""
        out: dict[str, Any] = {"code": str(self.code), "message": self.message, "hint": self.hint}
        if self.data:
            out["data"] = self.data
        return out


def internal(exc: BaseException) -> BridgeError:
    """Wrap an unexpected exception without leaking its traceback to the caller."""
    return BridgeError(ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}")
