"""One `pvf_plan_preview` / `pvf_plan_apply` / `pvf_plan_discard` for every plan the pvf tools build.

Edit, import, export and script plans live in the one core plan book, and a plan id names its kind
(`edit-…`, `import-…`, `export-…`, `script-…`), so one tool per step serves all four; the model learns one
flow — a `*_prepare` call (or `pvf_script_run` → `pvf_script_status`) → preview → apply (an export runs with
`pvf_export_execute`) — and tools/list spends ~1,000 o200k tokens less than seven per-kind tools did
(AGENT-TOKENS). The per-kind names of the pvfine design's table (`pvf_import_preview`, `pvf_script_apply`, …)
stay accepted on call as hidden aliases, with their argument names (`importPlanId`, `exportPlanId`,
`selectedKeys`).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Final

from pydantic import AliasChoices, Field

from deskbridge.core import limits
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.limits import PLAN_PAGE_MAX_ITEMS
from deskbridge.core.plans import PlanKind
from deskbridge.core.policy import ApprovalText
from deskbridge.core.tools import CallContext, Handler, ToolSpec
from deskbridge.kinds.pvf.args import PvfArgs, acknowledged, cursor, limit, request_id, revision

APPROVAL_DIFF_MAX_CHANGES: Final = 200
"""Changes whose diffs an approval request of `pvf_plan_apply` shows (the rest: pvf_plan_preview)."""

BUILDERS = {
    PlanKind.EDIT: "pvf_edit_prepare",
    PlanKind.IMPORT: "pvf_import_prepare",
    PlanKind.EXPORT: "pvf_export_prepare",
    PlanKind.SCRIPT: "pvf_script_run",
}
"""The tool that builds each kind of plan (what to call again when one expired or went stale)."""

_PLAN_ID = Field(
    validation_alias=AliasChoices("planId", "importPlanId", "exportPlanId"),
    description="From a *_prepare call, or pvf_script_status.",
)


class PreviewArgs(PvfArgs):
    planId: str = _PLAN_ID
    filter: str | None = Field(None, max_length=1000, description="Path substring.")
    cursor: str | None = cursor()
    limit: int = limit(50, PLAN_PAGE_MAX_ITEMS)


class ApplyArgs(PvfArgs):
    planId: str = _PLAN_ID
    expectedRevision: int | None = revision()
    changeKeys: list[str] = Field(
        min_length=1,
        validation_alias=AliasChoices("changeKeys", "selectedKeys"),
        description="At least one key from pvf_plan_preview; to drop the whole plan, call pvf_plan_discard.",
    )
    overwriteKeys: list[str] = Field(
        default_factory=list, description="Import: the selected keys that replace files."
    )
    acknowledgedWarningIds: list[str] = acknowledged()
    requestId: str | None = request_id()


class DiscardArgs(PvfArgs):
    planId: str = _PLAN_ID


def _kind_of(plan_id: str) -> PlanKind | None:
    prefix = plan_id.split("-", 1)[0]
    return next((k for k in PlanKind if str(k) == prefix), None)


def _rebuild_hint(plan_id: str) -> str:
    kind = _kind_of(plan_id)
    again = BUILDERS[kind] if kind is not None else "its *_prepare tool or pvf_script_run"
    return f"It expired (plans live 10 minutes), was applied or discarded; build it again with {again}."


def _rehinted(handler: Handler) -> Handler:
    """A plan that is gone (unknown, expired, applied, discarded) names the tool that builds a new one."""

    @functools.wraps(handler)
    def run(call: Any, args: Any) -> Any:
        try:
            return handler(call, args)
        except BridgeError as exc:
            if exc.code is ErrorCode.NOT_FOUND and "plan" in exc.message:
                exc.hint = _rebuild_hint(args.planId)
            raise

    assert not inspect.iscoroutinefunction(handler)
    return run


def _only_the_expected_revision_is_off(eng: Any, plan_id: str, data: dict[str, Any]) -> bool:
    """A STALE_PLAN whose plan still matches the workspace: only the caller's expectedRevision was wrong (the
    "build it again" hint would send them to re-run a script for nothing)."""
    try:
        plan = eng.get_plan(plan_id)
    except BridgeError:
        return False
    return (
        data.get("workspaceId") == plan["workspaceId"]
        and data.get("revision") is not None
        and data.get("revision") == data.get("planRevision")
    )


def _stale_hint(eng: Any, exc: BridgeError, plan_id: str, what: PlanKind) -> None:
    """A STALE_PLAN's hint: pass the current revision (only expectedRevision was off) or rebuild the plan."""
    data = exc.data or {}
    if exc.code is ErrorCode.STALE_PLAN and _only_the_expected_revision_is_off(eng, plan_id, data):
        exc.hint = (
            f"The plan is current: the workspace is still at revision {data['revision']}, where it was "
            f"built; call pvf_plan_apply again with expectedRevision {data['revision']}."
        )
    elif exc.code is ErrorCode.STALE_PLAN:
        exc.hint = (
            f"The workspace changed since the plan was built: build it again with {BUILDERS[what]} on "
            "the current revision (pvf_workspace_info) and apply the new plan."
        )


def _selection(args: ApplyArgs) -> dict[str, Any]:
    """What an apply commits, as `Engine.apply_plan` and `Engine.check_apply` take it: the approval's check and the
    apply itself must judge the same selection."""
    return {
        "change_keys": args.changeKeys,
        "expected_revision": args.expectedRevision,
        "acknowledged_warning_ids": args.acknowledgedWarningIds,
    }


def plan_tools(svc: Any) -> list[ToolSpec]:
    eng = svc.engine

    def kind(plan_id: str) -> PlanKind:
        return PlanKind(eng.get_plan(plan_id)["kind"])  # NOT_FOUND for an unknown id

    def preview(call: CallContext, args: PreviewArgs) -> dict[str, Any]:
        page = eng.preview_plan(args.planId, args.cursor, args.limit, key_filter=args.filter)
        plan = eng.get_plan(args.planId)
        if plan["kind"] == PlanKind.EXPORT:
            for item in page["items"]:
                item["entryKey"] = item["changeKey"]  # the export tools' name for an entry (pvfine design)
        page["plan"] = plan
        return page

    def apply(call: CallContext, args: ApplyArgs) -> dict[str, Any]:
        what = kind(args.planId)
        if what is PlanKind.EXPORT:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"{args.planId} is an export plan: it writes files outside the archive, so it is run, not applied",
                f"Call pvf_export_execute with exportPlanId {args.planId} and an outputParent.",
            )
        if args.overwriteKeys and what is not PlanKind.IMPORT:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                "overwriteKeys is for import plans only",
                "Call pvf_plan_apply again without overwriteKeys.",
            )
        if what is PlanKind.SCRIPT and args.expectedRevision is None:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                "a script plan is applied against the revision it was run on: pass expectedRevision",
                "Call pvf_plan_apply again with expectedRevision (plan.revision in pvf_plan_preview).",
            )
        try:
            if what is PlanKind.IMPORT:
                return svc.import_apply(
                    call.caller,
                    args.planId,
                    args.expectedRevision,
                    args.changeKeys,
                    args.overwriteKeys,
                    args.acknowledgedWarningIds,
                )
            out = eng.apply_plan(args.planId, caller=call.caller, kind=what, **_selection(args))
        except BridgeError as exc:
            _stale_hint(eng, exc, args.planId, what)
            raise
        out["workspaceCommitted"] = True
        out["diskCommitted"] = False
        return out

    def discard(call: CallContext, args: DiscardArgs) -> dict[str, Any]:
        what = kind(args.planId)
        out = eng.discard_plan(args.planId, caller=call.caller, kind=what)
        if what is PlanKind.IMPORT:
            svc._drop_spills()  # the frozen source bytes go with the plan
        return out

    def apply_summary(args: ApplyArgs) -> ApprovalText:
        try:
            plan = eng.get_plan(args.planId)  # an unknown plan fails before anyone is asked
        except BridgeError as exc:
            exc.hint = _rebuild_hint(args.planId)
            raise
        what = PlanKind(plan["kind"])
        if what is not PlanKind.EXPORT:
            # Checked as the apply will check it (applied or stale plan, unknown keys, warnings not
            # acknowledged) before the person is asked: else they approve a commit that then fails, and are
            # asked again on the corrected call.
            try:
                eng.check_apply(args.planId, kind=what, **_selection(args))
            except BridgeError as exc:
                _stale_hint(eng, exc, args.planId, what)
                raise
        shown = ", ".join(args.changeKeys[:5]) + (
            f" and {len(args.changeKeys) - 5} more" if len(args.changeKeys) > 5 else ""
        )
        summary = (
            f"commit {len(args.changeKeys)} of the {plan['changeCount']} change(s) of the {plan['kind']} plan "
            f"{args.planId} to the workspace (saved only with pvf_archive_save): {shown}"
        )
        return ApprovalText(summary, diff=selected_diffs(args.planId, args.changeKeys))

    def selected_diffs(plan_id: str, keys: list[str]) -> str | None:
        """The diffs of the changes to be applied, as the person approving sees them (the file names alone said
        nothing of what an agent's plan really does); cut at the approval's diff budget."""
        budget = limits.APPROVAL_DIFF_MAX_BYTES
        parts: list[str] = []
        with eng.lock:
            changes = eng.plans.get(plan_id).changes
            for n, key in enumerate(keys):
                change = changes.get(key)
                if change is None:
                    continue
                if budget <= 0 or n >= APPROVAL_DIFF_MAX_CHANGES:
                    parts.append(f"… and {len(keys) - n} more change(s): pvf_plan_preview shows them\n")
                    break
                item, _cut, used = change.to_dict(diff_budget=budget)
                budget -= max(used, 1)
                diff = item.get("diff")
                parts.append(
                    diff if diff else f"{item.get('action')} {key} (no text diff, {item.get('size')} bytes)\n"
                )
        return "".join(p if p.endswith("\n") else p + "\n" for p in parts) or None

    return [
        ToolSpec(
            "pvf_plan_preview",
            "Preview a plan",
            "One page of any plan (edit, import, export, script) with diffs and warnings.",
            PreviewArgs,
            _rehinted(preview),
            read_only=True,
            aliases=("pvf_edit_preview", "pvf_import_preview", "pvf_export_preview", "pvf_script_preview"),
        ),
        ToolSpec(
            "pvf_plan_apply",
            "Apply a plan",
            "Commit the selected changes of an edit, import or script plan to the workspace (not to disk).",
            ApplyArgs,
            _rehinted(apply),
            aliases=("pvf_edit_apply", "pvf_import_apply", "pvf_script_apply"),
            operation="edit",
            approval_summary=apply_summary,
        ),
        ToolSpec(
            "pvf_plan_discard",
            "Discard a plan",
            "Drop a plan of any kind; twice is harmless.",
            DiscardArgs,
            _rehinted(discard),
            idempotent=True,
            aliases=("pvf_edit_discard", "pvf_import_discard", "pvf_export_discard", "pvf_script_discard"),
        ),
    ]
