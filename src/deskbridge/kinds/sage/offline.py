"""The sage tools answered from the latest public snapshot, for `deskbridge mcp --project` when no server is live.

Same tool names and schemas as the live tools (they are taken from `sage_tools`), read-only, and every answer
says `source: snapshot` and how old the snapshot is. Questions the snapshot cannot answer faithfully (forward
references with provenance, include resolution, diagnostics) are refused with `NOT_READY` and the way to get
the live index — never answered with an empty list that looks like "nothing".
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import os
import posixpath
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.limits import LIST_PAGE_MAX
from deskbridge.core.tools import CallContext, ToolSpec
from deskbridge.kinds.base import KindServices, KindWorkspaceBase
from deskbridge.kinds.sage import queries
from deskbridge.kinds.sage.guide import USAGE_GUIDE
from deskbridge.kinds.sage.model import outside_error
from deskbridge.kinds.sage.snapshot import list_snapshots, snapshot_dir

LIVE_ONLY = {
    "sage_get_asset_references": "forward references with provenance need the live index (the snapshot keeps no "
    "element tree)",
    "sage_resolve_include": "include resolution needs the live search paths",
    "sage_list_diagnostics": "diagnostics are not part of the snapshot",
}


CHANGED_SHOWN = 20
"""Project files changed since the snapshot an answer names (the count says how many there are)."""
CHANGE_CHECK_S = 1.0
"""How long one look at the project's files serves (a walk of the mod folder: a few ms per 1,000 files)."""


class Snapshot:
    """One loaded `current.json.gz`, with the lookups the offline tools need."""

    def __init__(self, data: dict[str, Any], path: Path) -> None:
        self.data = data
        self.path = path
        self.project = str(data.get("project", ""))
        self.by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.by_type: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
        for row in data.get("assets", []):
            key = str(row.get("id", "")).casefold()
            self.by_id[key].append(row)
            self.by_type[str(row.get("type", ""))][key].append(row)
        self.refs_to: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for ref in data.get("references", []):
            self.refs_to[str(ref.get("id", "")).casefold()].append(ref)
        self.defines: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in data.get("defines", []):
            self.defines[str(row.get("name", "")).casefold()].append(row)
        self.files = {str(row.get("file") or "") for row in data.get("assets", [])} - {""}
        """The files the snapshot's definitions come from (display paths: `Data/…` inside the project)."""

    def age_s(self) -> float:
        generated = self.data.get("generatedAt")
        with contextlib.suppress(TypeError, ValueError):
            stamp = datetime.fromisoformat(str(generated).replace("Z", "+00:00"))
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=UTC)
            return max(0.0, time.time() - stamp.timestamp())
        return max(0.0, time.time() - self.path.stat().st_mtime)

    def built_at(self) -> float:
        """When the index behind the snapshot was built (its `generatedAt`), as a timestamp."""
        return time.time() - self.age_s()

    def envelope(self, changed: list[str] | None = None) -> dict[str, Any]:
        """The `index` block of an answer; `changed`: project files changed since the snapshot was built."""
        return {
            "state": "snapshot",
            "source": "snapshot",
            "snapshotAgeSeconds": round(self.age_s(), 1),
            "phase": self.data.get("phase"),
            "complete": bool(self.data.get("complete")),
            "stale": bool(self.data.get("stale")) or bool(changed),
            "changedSinceSnapshot": (changed or [])[:CHANGED_SHOWN],
            "changedSinceSnapshotCount": len(changed or ()),
            "buildId": self.data.get("buildId"),
            "generatedAt": self.data.get("generatedAt"),
            "projectDir": self.project,
        }


class SnapshotWorkspace(KindWorkspaceBase):
    """The sage kind without a server: the snapshot's answers under the live tools' names."""

    kind = "sage"

    def __init__(self, path: Path, services: KindServices) -> None:
        from deskbridge.kinds.sage.service import SageService

        sdk = services.options.get("sdk") or services.settings.sage.sdk
        # Never started: it names the tools (so the schemas are the live ones) and finds the project root.
        self.service = SageService(path, sdk)
        self.path = self.service.project
        self._snapshot: Snapshot | None = None
        self._loaded_mtime = -1.0
        self._changed: tuple[Snapshot, float, list[str]] | None = None

    # -- the snapshot ---------------------------------------------------------------------------------------
    def snapshot_file(self) -> Path:
        return snapshot_dir(self.path, self.service.data_dir) / "current.json.gz"

    def snapshot(self) -> Snapshot:
        path = self.snapshot_file()
        try:
            mtime = path.stat().st_mtime
        except OSError:
            raise BridgeError(
                ErrorCode.NOT_READY,
                f"no deskbridge server is running for {str(self.path)!r} and it has no saved index snapshot",
                hint=f"Start `deskbridge serve {self.path}` (it indexes the mod and keeps a snapshot), or run "
                f"`deskbridge snapshot {self.path}`; then call sage_get_status again.",
            ) from None
        if self._snapshot is None or mtime != self._loaded_mtime:  # a server wrote a newer one meanwhile
            self._snapshot = Snapshot(json.loads(gzip.decompress(path.read_bytes())), path)
            self._loaded_mtime = mtime
        return self._snapshot

    def changed_since(self, snap: Snapshot) -> list[str]:
        """Project files written after the snapshot's index was built, or named by it and gone (display
        paths): `.xml` files under the project newer than the build, found by a walk of the project folder
        (the SDK, the game's own data, is not looked at). Modification times only: a file copied in with an
        older time is not seen. One look serves `CHANGE_CHECK_S`."""
        now = time.monotonic()
        cached = self._changed
        if cached is not None and cached[0] is snap and now - cached[1] < CHANGE_CHECK_S:
            return cached[2]
        built = snap.built_at()
        root = Path(self.path)
        changed: list[str] = []
        seen: set[str] = set()
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                full = os.path.join(folder, name)
                shown = os.path.relpath(full, root).replace(os.sep, "/")
                seen.add(shown.casefold())  # every file: the snapshot also names the `.w3x` art it indexed
                if not name.lower().endswith(".xml"):
                    continue
                with contextlib.suppress(OSError):
                    if os.stat(full).st_mtime > built:
                        changed.append(shown)
        for shown in snap.files:
            if not Path(shown).is_absolute() and shown.casefold() not in seen:
                changed.append(shown)  # gone (or renamed) since the snapshot
        changed.sort()
        self._changed = (snap, now, changed)
        return changed

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        snap = self.snapshot()
        envelope = snap.envelope(self.changed_since(snap))
        body["source"] = "snapshot"
        body["snapshotAgeSeconds"] = envelope["snapshotAgeSeconds"]
        body["index"] = envelope
        return body

    # -- tools ----------------------------------------------------------------------------------------------
    def tools(self) -> list[ToolSpec]:
        from deskbridge.kinds.sage.tools import sage_tools

        handlers = {
            "sage_get_status": self._status,
            "sage_list_projects": self._projects,
            "sage_find_asset": self._find_asset,
            "sage_find_references": self._find_references,
            "sage_list_assets_by_type": self._list_by_type,
            "sage_get_definition": self._definition,
            "sage_is_file_active": self._is_file_active,
            "sage_find_define": self._find_define,
            "sage_unreferenced": self._unreferenced,
            "sage_get_inheritance_chain": self._chain,
            "sage_get_usage_guide": self._guide,
        }
        out = []
        for spec in sage_tools(self.service):
            handler = handlers.get(spec.name)
            handler = self._strict(spec.name, handler) if handler is not None else self._live_only(spec.name)
            out.append(dataclasses.replace(spec, handler=handler))
        return out

    def _strict(self, name: str, handler: Any) -> Any:
        """`freshness: strict` (or `allowStale: false`) is `INDEX_STALE` while project files changed since
        the snapshot — it is never answered from an index that does not hold them, with `stale: false`."""

        async def checked(ctx: CallContext, args: Any) -> dict[str, Any]:
            consistency = getattr(args, "consistency", None)
            if consistency is not None and not consistency()[2]:
                snap = self.snapshot()
                changed = self.changed_since(snap)
                if changed or snap.data.get("stale"):
                    shown = ", ".join(changed[:5]) + (
                        f" and {len(changed) - 5} more" if len(changed) > 5 else ""
                    )
                    raise BridgeError(
                        ErrorCode.INDEX_STALE,
                        f"the saved snapshot is older than the project: {shown or 'it was written stale'}",
                        hint=f"Start `deskbridge serve {self.path}` for live answers (or run `deskbridge "
                        f"snapshot {self.path}` to refresh the snapshot), then call {name} again; freshness "
                        "newest answers from the snapshot as it is.",
                        data={"source": "snapshot", "changedSinceSnapshot": changed[:CHANGED_SHOWN]},
                    )
            try:
                return await handler(ctx, args)
            except BridgeError as exc:
                exc.hint = exc.hint.replace("{tool}", name)  # as the live tools do (tools.sage_tools)
                raise

        return checked

    def _live_only(self, name: str) -> Any:
        async def refuse(ctx: CallContext, args: Any) -> dict[str, Any]:
            reason = LIVE_ONLY.get(name, "this question needs the live index")
            raise BridgeError(
                ErrorCode.NOT_READY,
                f"{name} is not available offline: {reason}; only the snapshot is",
                hint=f"Start `deskbridge serve {self.path}` and call {name} again; meanwhile sage_find_asset, "
                "sage_find_references and sage_get_definition answer from the snapshot.",
                data={"source": "snapshot", "projectDir": str(self.path)},
            )

        return refuse

    async def _status(self, ctx: CallContext, args: Any) -> dict[str, Any]:
        snap = self.snapshot()
        counts: dict[str, int] = {}
        for row in snap.data.get("assets", []):
            counts[row.get("type", "")] = counts.get(row.get("type", ""), 0) + 1
        return self.answer(
            {
                "sdk": snap.data.get("sdk"),
                "streams": {s.get("name"): s.get("entry") for s in snap.data.get("streams", [])},
                "stats": snap.data.get("stats", {}),
                "assetTypes": dict(sorted(counts.items())),
                "snapshot": str(snap.path),
                "liveOnly": sorted(LIVE_ONLY),
                "note": "No deskbridge server is running for this project: answers come from the saved "
                "snapshot. Start `deskbridge serve` for live answers.",
            }
        )

    async def _projects(self, ctx: CallContext, args: Any) -> dict[str, Any]:
        return self.answer({"open": [], "snapshots": list_snapshots(self.service.data_dir)[:LIST_PAGE_MAX]})

    def _defs(self, ident: str, asset_type: str | None) -> list[dict[str, Any]]:
        snap = self.snapshot()
        if asset_type is None:
            return list(snap.by_id.get(ident.casefold(), ()))
        return list(snap.by_type.get(asset_type, {}).get(ident.casefold(), ()))

    async def _find_asset(self, ctx: CallContext, a: Any) -> dict[str, Any]:
        rows = self._defs(a.id, a.type)
        out = queries.page(rows, a.cursor, a.limit)
        out["id"] = a.id
        if not rows:
            out["hint"] = (
                "No definition in the snapshot: check the spelling, or call sage_list_assets_by_type."
            )
        return self.answer(out)

    async def _find_references(self, ctx: CallContext, a: Any) -> dict[str, Any]:
        sites = self.snapshot().refs_to.get(a.id.casefold(), [])
        if a.type is not None:
            # The snapshot has no type hierarchy: keep references typed as asked, plus those whose declared
            # type no definition of this id has (they name a base type such as BaseUnitTemplate).
            own = {row.get("type") for row in self._defs(a.id, None)}
            sites = [s for s in sites if s.get("type") == a.type or s.get("type") not in own]
        out = queries.page(sites, a.cursor, a.limit)
        out["items"] = [_live_site(row) for row in out["items"]]
        out.update({"id": a.id, "type": a.type})
        if not sites and not self._defs(a.id, None):
            out["hint"] = queries.NO_SUCH_ID
        return self.answer(out)

    async def _list_by_type(self, ctx: CallContext, a: Any) -> dict[str, Any]:
        by_key = self.snapshot().by_type.get(a.type, {})
        pf = (a.prefix or "").casefold()
        keys = sorted(k for k in by_key if k.startswith(pf))
        rows = [
            {
                "id": by_key[k][-1].get("id"),
                "definitions": len(by_key[k]),
                "file": by_key[k][-1].get("file"),
                "line": by_key[k][-1].get("line"),
                "origin": by_key[k][-1].get("origin"),
            }
            for k in keys
        ]
        out = queries.page(rows, a.cursor, a.limit)
        out.update({"type": a.type, "prefix": a.prefix})
        return self.answer(out)

    async def _definition(self, ctx: CallContext, a: Any) -> dict[str, Any]:
        defs = self._defs(a.id, a.type)
        if not defs:
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                f"No definition of {a.type} {a.id!r} in the snapshot.",
                hint="Call sage_find_asset with the id alone to see which types define it.",
            )
        which = getattr(a, "which", None)
        if which is not None and not 0 <= which < len(defs):
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"which={which} but there are {len(defs)} definitions",
                hint=f"Call {{tool}} with which between 0 and {len(defs) - 1}, or sage_find_asset to list them.",
            )
        compiled = [d for d in defs if "all" in (d.get("streams") or {}).values()]
        row = defs[which] if which is not None else (compiled or defs)[-1]
        # The live answer's shape (queries.get_definition), so an agent reads one shape with or without a server.
        body: dict[str, Any] = {**row, "definitionCount": len(defs), "which": defs.index(row)}
        body.update(startLine=None, endLine=None, excerpt=None, truncated=False)
        file = str(row.get("file") or "")
        if not file:
            body["note"] = "Defined only in a compiled manifest; there is no XML to show."
        else:
            path = Path(file) if Path(file).is_absolute() else Path(self.path) / file
            try:
                start, end, text, truncated = queries._excerpt(
                    str(path), int(row.get("line", 0)), a.type, shown=file
                )
            except (BridgeError, OSError, ValueError):
                body["note"] = "The file changed or is gone since the snapshot: only its record is shown."
            else:
                body.update(startLine=start, endLine=end, excerpt=text, truncated=truncated)
        return self.answer(body)

    async def _is_file_active(self, ctx: CallContext, a: Any) -> dict[str, Any]:
        snap = self.snapshot()
        wanted = posixpath.normpath(a.path.replace("\\", "/"))
        if Path(wanted).is_absolute():
            with contextlib.suppress(ValueError):
                wanted = Path(wanted).relative_to(self.path).as_posix()
        sdk = snap.data.get("sdk")
        if (
            wanted == ".."
            or wanted.startswith("../")
            or (Path(wanted).is_absolute() and not (sdk and Path(wanted).is_relative_to(sdk)))
        ):
            raise outside_error(a.path)  # as the live tool refuses it (SageIndex.check_scope)
        folded = wanted.casefold()
        wanted = next((f for f in snap.files if f.casefold() == folded), wanted)  # the file's own spelling
        streams: dict[str, str] = {}
        for row in snap.data.get("assets", []):
            if str(row.get("file", "")).casefold() == folded:
                streams.update(row.get("streams") or {})
        included_by = [
            {"file": e.get("from"), "line": e.get("line"), "kind": e.get("kind"), "source": e.get("source")}
            for e in snap.data.get("includeGraph", [])
            if str(e.get("to") or "").casefold() == folded
        ]
        active = bool(streams) or bool(included_by)
        return self.answer(
            {
                "path": wanted,
                "active": active,
                "streams": [{"stream": s, "how": how} for s, how in streams.items()],
                "compiled": any(how == "all" for how in streams.values()),
                "includedBy": included_by[:100],
                "note": None
                if active
                else "No stream includes this file: edits to it have no effect in game.",
            }
        )

    async def _find_define(self, ctx: CallContext, a: Any) -> dict[str, Any]:
        name = a.name.lstrip("$")
        rows = [
            {**d, "exactCase": d.get("name") == name}
            for d in self.snapshot().defines.get(name.casefold(), [])
        ]
        out = queries.page(rows, a.cursor, a.limit)
        out["name"] = a.name
        if not rows:
            known = {k: str(v[0].get("name")) for k, v in self.snapshot().defines.items() if v}
            out.update(queries.define_not_found(a.name, known))
        return self.answer(out)

    async def _unreferenced(self, ctx: CallContext, a: Any) -> dict[str, Any]:
        snap = self.snapshot()
        types = [a.type] if a.type else sorted(snap.by_type)
        rows = []
        for t in types:
            for key, defs in sorted(snap.by_type.get(t, {}).items()):
                if not a.includeSdk and not any(d.get("origin") == "project" for d in defs):
                    continue
                users = [
                    r
                    for r in snap.refs_to.get(key, ())
                    if not (r.get("kind") == "inheritFrom" and str(r.get("fromId", "")).casefold() == key)
                ]
                if users:
                    continue
                d = defs[-1]
                rows.append(
                    {
                        "type": t,
                        "id": d.get("id"),
                        "file": d.get("file"),
                        "line": d.get("line"),
                        "origin": d.get("origin"),
                    }
                )
        out = queries.page(rows, a.cursor, a.limit)
        out["type"] = a.type
        if not a.type:
            out["note"] = (
                "Offline, every asset type is listed (the schema's reference targets need the live index)."
            )
        return self.answer(out)

    async def _chain(self, ctx: CallContext, a: Any) -> dict[str, Any]:
        snap = self.snapshot()
        defs = self._defs(a.id, a.type)
        if not defs:
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                f"No definition of {a.type} {a.id!r} in the snapshot.",
                hint="Call sage_find_asset with the id alone to see which types define it.",
            )
        parents: dict[tuple[str, str], dict[str, Any]] = {}
        for refs in snap.refs_to.values():
            for r in refs:
                if r.get("kind") == "inheritFrom" and r.get("fromId"):
                    parents.setdefault((str(r.get("fromType")), str(r["fromId"]).casefold()), r)
        chain, stop = [], "root"
        current: dict[str, Any] | None = defs[-1]
        seen: set[tuple[str, str]] = set()
        while current is not None:
            key = (str(current.get("type")), str(current.get("id", "")).casefold())
            if key in seen:
                stop = "cycle"
                break
            seen.add(key)
            ref = parents.get(key)
            chain.append({**current, "inheritFrom": f"{ref['type']}:{ref['id']}" if ref else None})
            if ref is None:
                break
            if len(chain) >= queries.INHERITANCE_MAX:
                stop = "limit"
                break
            targets = [d for d in snap.by_id.get(str(ref["id"]).casefold(), ()) if d is not current]
            if not targets:
                stop = "missing"
                break
            current = targets[-1]
        return self.answer({"type": a.type, "id": a.id, "chain": chain, "stop": stop})

    async def _guide(self, ctx: CallContext, args: Any) -> dict[str, Any]:
        body = {"guide": USAGE_GUIDE, "offline": "Answers come from the saved snapshot until a server runs."}
        with contextlib.suppress(BridgeError):
            return self.answer(body)
        return body

    # -- the rest of KindWorkspace (no routes, UI or background work: KindWorkspaceBase) ----------------------
    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {**super().status(), "source": "snapshot"}
        with contextlib.suppress(BridgeError):
            out["index"] = self.snapshot().envelope()
        return out


def _live_site(row: dict[str, Any]) -> dict[str, Any]:
    """A snapshot's reference row (flat: `type`/`id` of the target, `fromType`/`fromId`/`includedAt`, the
    public snapshot schema) in the shape the live `sage_find_references` answers with, so an agent reads
    one shape whether or not a server is running."""
    owner = None
    if row.get("fromId") is not None:
        owner = {"type": row.get("fromType"), "id": row.get("fromId")}
        if row.get("includedAt"):
            owner["includedAt"] = row["includedAt"]
    return {
        "file": row.get("file"),
        "line": row.get("line"),
        "column": row.get("column"),
        "endColumn": row.get("endColumn"),
        "kind": row.get("kind"),
        "element": row.get("element"),
        "parent": None,  # not in the snapshot
        "attribute": row.get("attribute"),
        "targetType": row.get("type"),
        "value": row.get("id"),
        "from": owner,
    }
