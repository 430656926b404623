"""Change plans: preview every change as a diff, then apply only the changes the caller selected.

A plan is built by a kind (a script run, an import, a bulk edit, an export) against one workspace
identity and revision. It holds changes keyed by a stable `changeKey` (unified diff for text, a
size/hash summary for binary), warnings with stable `warningId`s, and the kind's `on_apply` callback.

* ids are namespaced by plan kind: `script-…`, `import-…`, `export-…`, `edit-…`; a tool for one kind
  never accepts another kind's id;
* one pending *write* plan (script, import, edit) per workspace and one pending *export* plan —
  `PLAN_PENDING` / `EXPORT_PLAN_PENDING` — shared by the UI and every MCP caller; plans are never
  silently replaced (seed "单运行与单预览");
* preview is paginated with an opaque cursor, capped by item count and diff bytes, and says `truncated`
  when a diff was cut;
* apply takes an explicit key selection and the expected revision; it runs under the engine lock, checks
  identity and revision (stale → `STALE_PLAN`, nothing applied), unknown keys (`INVALID_ARGUMENT`),
  unacknowledged warnings (`INVALID_ARGUMENT` listing them), then calls the kind and commits through the
  engine, which advances the revision exactly once. Unselected changes are dropped with the plan;
* a plan lives `PLAN_TTL_S` (10 min) from creation; expired plans release their slot.

The `Engine` owns a `PlanBook` and calls it under `Engine.lock`; nothing here takes a lock itself.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from deskbridge.core import limits, paging
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.workspace import DELETED


class PlanKind(StrEnum):
    SCRIPT = "script"
    IMPORT = "import"
    EXPORT = "export"
    EDIT = "edit"

    @property
    def is_write(self) -> bool:
        return self is not PlanKind.EXPORT


class PlanState(StrEnum):
    PENDING = "pending"
    APPLIED = "applied"
    DISCARDED = "discarded"
    EXPIRED = "expired"


# --------------------------------------------------------------------------------------------- changes


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _describe(value: Any) -> dict[str, Any]:
    raw = value if isinstance(value, bytes | bytearray) else repr(value).encode()
    return {"size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}


def text_diff(key: str, old: str | None, new: str | None) -> str:
    """Unified diff of two texts with `a/key` and `b/key` headers (`/dev/null` for add or delete)."""
    a = [] if old is None else old.splitlines(keepends=True)
    b = [] if new is None else new.splitlines(keepends=True)
    lines = difflib.unified_diff(
        a,
        b,
        "/dev/null" if old is None else f"a/{key}",
        "/dev/null" if new is None else f"b/{key}",
        lineterm="\n",
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


@dataclass
class Change:
    """One proposed change. `new` is what `on_apply` receives (DELETED for a deletion)."""

    key: str
    action: str
    """'add', 'modify' or 'delete'."""
    new: Any
    diff: str | None = None
    """Unified diff for text; None for binary (see `binary`)."""
    binary: dict[str, Any] | None = None
    """{old: {size, sha256} | None, new: {size, sha256} | None} for non-text values."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Kind-specific, JSON-safe details shown in the preview (type, overwrite, dependency hints…)."""
    requires: tuple[str, ...] = ()
    """changeKeys in the same plan this change depends on (a string-table entry, a registry line).
    Selecting it without them is allowed only after acknowledging the dependency warning."""
    diff_of: Callable[[], str | None] | None = field(default=None, repr=False, compare=False)
    """Computes `diff` on its first read instead of at plan time (then dropped): a script plan of thousands
    of files is previewed a page at a time, and most diffs are never looked at. Called under the engine
    lock (preview holds it), once; what it returns is `diff` from then on."""

    def to_dict(self, diff_budget: int | None = None) -> tuple[dict[str, Any], bool, int]:
        """Preview form, the diff cut to `diff_budget` bytes; returns (item, cut?, diff bytes used)."""
        item: dict[str, Any] = {"changeKey": self.key, "action": self.action}
        cut = False
        used = 0
        if self.diff is not None:
            raw = self.diff.encode("utf-8")
            if diff_budget is not None and len(raw) > diff_budget:
                item["diff"] = raw[:diff_budget].decode("utf-8", "ignore")
                cut = True
                used = diff_budget
            else:
                item["diff"] = self.diff
                used = len(raw)
            item["diffTruncated"] = cut
        if self.binary is not None:
            item["binary"] = self.binary
        if self.requires:
            item["requires"] = list(self.requires)
        if self.meta:
            item.update(self.meta)
        return item, cut, used


def _read_diff(change: Change) -> str | None:
    compute = change.diff_of
    if compute is not None:
        change.diff_of = None
        change._diff = compute()
    return change._diff


def _write_diff(change: Change, value: str | None) -> None:
    change._diff = value


# `diff` stays a plain attribute to every reader and writer; a pending `diff_of` is resolved on the first read.
Change._diff = None  # type: ignore[attr-defined]
Change.diff = property(_read_diff, _write_diff)  # type: ignore[assignment]


def make_change(key: str, old: Any, new: Any, *, requires: Sequence[str] = (), **meta: Any) -> Change:
    """A change from the old value (None: absent) to the new one (DELETED or None: delete)."""
    if new is None:
        new = DELETED
    if old is None and new is DELETED:
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"{key!r} neither exists nor is created")
    action = "add" if old is None else "delete" if new is DELETED else "modify"
    new_val = None if new is DELETED else new
    if (old is None or _is_text(old)) and (new_val is None or _is_text(new_val)):
        return Change(
            key, action, new, diff=text_diff(key, old, new_val), meta=dict(meta), requires=tuple(requires)
        )
    binary = {
        "old": None if old is None else _describe(old),
        "new": None if new_val is None else _describe(new_val),
    }
    return Change(key, action, new, binary=binary, meta=dict(meta), requires=tuple(requires))


@dataclass
class PlanWarning:
    """Something the caller must acknowledge by id before applying (e.g. a dependency left out)."""

    message: str
    keys: tuple[str, ...] = ()
    """The changes it concerns; empty means the whole plan. It must be acknowledged when any is selected."""
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            # Stable: the same message about the same keys always gets the same id, across re-runs.
            digest = hashlib.sha256(json.dumps([self.message, sorted(self.keys)]).encode()).hexdigest()
            self.id = "w-" + digest[:12]

    def to_dict(self) -> dict[str, Any]:
        return {"warningId": self.id, "message": self.message, "changeKeys": list(self.keys)}


ApplyFn = Callable[[list[Change]], Mapping[str, Any] | None]
"""The kind's apply: gets the selected changes (under the engine lock); returns the overlay mapping to
commit (key → value | DELETED), or None to commit `{c.key: c.new}`. For export plans its return value is
the execution result and nothing is committed."""


@dataclass
class Plan:
    id: str
    kind: PlanKind
    owner: str
    workspace_id: str
    revision: int
    changes: dict[str, Change]
    warnings: list[PlanWarning]
    on_apply: ApplyFn | None
    summary: dict[str, Any]
    created: float
    created_mono: float
    state: PlanState = PlanState.PENDING
    applied_revision: int | None = None

    def info(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for c in self.changes.values():
            counts[c.action] = counts.get(c.action, 0) + 1
        return {
            "planId": self.id,
            "kind": str(self.kind),
            "owner": self.owner,
            "state": str(self.state),
            "workspaceId": self.workspace_id,
            "revision": self.revision,
            "changeCount": len(self.changes),
            "counts": counts,
            "warnings": [w.to_dict() for w in self.warnings],
            "summary": self.summary,
            "created": self.created,
            "expiresIn": None,
            "appliedRevision": self.applied_revision,
        }


# --------------------------------------------------------------------------------------------- the book


class PlanBook:
    """All plans of one engine; the engine calls it under its lock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, ttl_s: float = limits.PLAN_TTL_S) -> None:
        self._clock = clock
        self.ttl_s = ttl_s
        self._plans: dict[str, Plan] = {}

    def create(
        self,
        kind: PlanKind,
        *,
        owner: str,
        workspace_id: str,
        revision: int,
        changes: Iterable[Change],
        warnings: Sequence[PlanWarning] = (),
        on_apply: ApplyFn | None = None,
        summary: Mapping[str, Any] | None = None,
    ) -> Plan:
        self.refuse_if_pending(kind)
        by_key: dict[str, Change] = {}
        for c in changes:
            if c.key in by_key:
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT, f"change key {c.key!r} appears twice in one plan"
                )
            by_key[c.key] = c
        plan = Plan(
            id=f"{kind}-{secrets.token_hex(8)}",
            kind=kind,
            owner=owner,
            workspace_id=workspace_id,
            revision=revision,
            changes=by_key,
            warnings=list(warnings),
            on_apply=on_apply,
            summary=dict(summary or {}),
            created=time.time(),
            created_mono=self._clock(),
        )
        self._plans[plan.id] = plan
        return plan

    def refuse_if_pending(self, kind: PlanKind, hint: str | None = None) -> None:
        """Raise `PLAN_PENDING` (`EXPORT_PLAN_PENDING` for an export) while `kind`'s slot is taken.

        `create` checks this itself; a kind calls it first, before the costly part of building a plan (compiling,
        reading sources), so a second plan is refused before the work rather than after it. `hint` names the
        kind's tools to apply or discard the occupant."""
        occupant = self.pending(kind)
        if occupant is None:
            return
        code = ErrorCode.EXPORT_PLAN_PENDING if kind is PlanKind.EXPORT else ErrorCode.PLAN_PENDING
        raise BridgeError(
            code,
            f"plan {occupant.id} ({occupant.kind}, by {occupant.owner}) is still pending",
            hint,
            data={"planId": occupant.id, "owner": occupant.owner},
        )

    def pending(self, kind: PlanKind | None = None) -> Plan | None:
        """The pending plan in `kind`'s slot (write plans share one slot), or any pending plan when None."""
        self.expire()
        for p in self._plans.values():
            if p.state is PlanState.PENDING and (kind is None or p.kind.is_write == kind.is_write):
                return p
        return None

    def get(self, plan_id: str, kind: PlanKind | None = None) -> Plan:
        self.expire()
        plan = self._plans.get(plan_id)
        if plan is None or (kind is not None and plan.kind is not kind):
            what = f"{kind} plan" if kind else "plan"
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                f"no {what} {plan_id!r}",
                "It expired (plans live 10 minutes), was applied or discarded; build it again.",
            )
        return plan

    def expires_in(self, plan: Plan) -> float:
        return max(0.0, self.ttl_s - (self._clock() - plan.created_mono))

    def expire(self) -> None:
        now = self._clock()
        for pid in list(self._plans):
            p = self._plans[pid]
            if p.state is PlanState.PENDING and now - p.created_mono > self.ttl_s:
                p.state = PlanState.EXPIRED
            if p.state is not PlanState.PENDING and now - p.created_mono > 2 * self.ttl_s:
                del self._plans[pid]  # keep finished plans a while so a late query gets their final state

    def info(self, plan: Plan) -> dict[str, Any]:
        out = plan.info()
        out["expiresIn"] = round(self.expires_in(plan), 3) if plan.state is PlanState.PENDING else None
        return out

    def preview(
        self,
        plan: Plan,
        cursor: str | None = None,
        limit: int | None = None,
        *,
        key_filter: str | None = None,
        max_bytes: int = limits.PLAN_PAGE_MAX_BYTES,
    ) -> dict[str, Any]:
        """One page of changes. Always at least one item when any remain; a diff past the budget is cut."""
        if limit is None:
            limit = limits.PLAN_PAGE_MAX_ITEMS
        if not 1 <= limit <= limits.PLAN_PAGE_MAX_ITEMS:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED if limit > 0 else ErrorCode.INVALID_ARGUMENT,
                f"limit must be between 1 and {limits.PLAN_PAGE_MAX_ITEMS}",
            )
        max_bytes = min(max_bytes, limits.PLAN_PAGE_MAX_BYTES)
        keys = [k for k in plan.changes if key_filter is None or key_filter.lower() in k.lower()]
        start = paging.offset_of(cursor, expect={"p": plan.id})
        items: list[dict[str, Any]] = []
        used = 0
        truncated = False
        pos = start
        while pos < len(keys) and len(items) < limit:
            change = plan.changes[keys[pos]]
            budget = max_bytes - used
            if items and change.diff is not None and len(change.diff.encode("utf-8")) > budget:
                break  # next page; only the first item of a page may be cut
            item, cut, n = change.to_dict(diff_budget=max(budget, 0))
            items.append(item)
            used += n
            truncated = truncated or cut
            pos += 1
        has_more = pos < len(keys)
        return {
            "planId": plan.id,
            "kind": str(plan.kind),
            "workspaceId": plan.workspace_id,
            "revision": plan.revision,
            "state": str(plan.state),
            "items": items,
            "total": len(keys),
            "nextCursor": paging.offset_cursor(pos, {"p": plan.id}) if has_more else None,
            "hasMore": has_more,
            "truncated": truncated,
            "warnings": [w.to_dict() for w in plan.warnings],
        }

    def select(self, plan: Plan, change_keys: Sequence[str], acknowledged: Iterable[str]) -> list[Change]:
        """Validate a selection: non-empty, all keys known, every relevant warning acknowledged."""
        if not change_keys:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                "no changeKeys selected",
                "Pass the changeKeys to apply (see the preview); discard the plan to apply none.",
            )
        unknown = [k for k in dict.fromkeys(change_keys) if k not in plan.changes]
        if unknown:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"{len(unknown)} changeKeys are not in plan {plan.id}",
                "Use the changeKeys exactly as the preview lists them.",
                data={"unknownKeys": unknown[:50]},
            )
        selected = set(change_keys)
        acked = set(acknowledged)
        missing = [
            w for w in plan.warnings if (not w.keys or selected.intersection(w.keys)) and w.id not in acked
        ]
        missing += [w for w in dependency_warnings(plan, selected) if w.id not in acked]
        if missing:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"{len(missing)} warnings are not acknowledged",
                "Read the warnings (here and in the preview), then select the missing dependencies "
                "or pass the warningIds in acknowledgedWarningIds.",
                data={
                    "unacknowledgedWarningIds": [w.id for w in missing],
                    "warnings": [w.to_dict() for w in missing[:50]],
                },
            )
        return [plan.changes[k] for k in dict.fromkeys(change_keys)]


def dependency_warnings(plan: Plan, selected: set[str]) -> list[PlanWarning]:
    """One warning per selected change whose required changes (in this plan) are left out.

    The id is stable (same change, same missing keys → same id), so a caller who chose to leave a
    dependency out on purpose can acknowledge it, as the seed's export rule asks ("依赖警告").
    """
    out = []
    for key in sorted(selected):
        change = plan.changes[key]
        lacking = sorted(d for d in change.requires if d in plan.changes and d not in selected)
        if lacking:
            out.append(
                PlanWarning(f"{key} depends on {', '.join(lacking)}, which is not selected", keys=(key,))
            )
    return out
