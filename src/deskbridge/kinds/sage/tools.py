"""The `sage_*` tools: transport-neutral descriptions of every read-only query, served by the MCP layer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from deskbridge.core.errors import BridgeError
from deskbridge.core.limits import LIST_PAGE_MAX
from deskbridge.core.tools import CallContext, NoArgs, ToolArgs, ToolSpec
from deskbridge.kinds.sage import effective, forward, queries
from deskbridge.kinds.sage.guide import USAGE_GUIDE
from deskbridge.kinds.sage.service import SageService
from deskbridge.kinds.sage.snapshot import list_snapshots

FRESHNESS = (
    "newest: answer now (may be stale); final: wait for the final index; strict: final or INDEX_STALE."
)


def _compact(schema: dict[str, Any], cls: type) -> None:
    """Smaller tools/list: no per-property titles, and `X | None = None` advertised as plain X (omitting
    an argument already means None)."""
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
        alts = prop.get("anyOf")
        if alts and len(alts) == 2 and {"type": "null"} in alts and prop.get("default", 0) is None:
            del prop["anyOf"], prop["default"]
            prop.update(next(a for a in alts if a != {"type": "null"}))


_MAX_PAGE = {"maximum": LIST_PAGE_MAX}
"""Advertised, not enforced by validation: a larger page is answered by the tool's own LIMIT_EXCEEDED, whose
hint says to page with the cursor."""


class Consistency(ToolArgs):
    """How fresh the answer must be: one shared `freshness` choice for every index-backed tool.

    The older trio `waitForIndex` / `timeoutSeconds` / `allowStale` is still accepted (not advertised, to keep
    tools/list small): `waitForIndex: true` is `final`, `allowStale: false` is `strict`."""

    model_config = ConfigDict(json_schema_extra=_compact)

    freshness: Literal["newest", "final", "strict"] = Field("newest", description=FRESHNESS)
    waitForIndex: SkipJsonSchema[bool] = False
    timeoutSeconds: SkipJsonSchema[float | None] = None
    allowStale: SkipJsonSchema[bool] = True

    def consistency(self) -> tuple[bool, float | None, bool]:
        """(wait for the final index, timeout, allow a stale answer)."""
        wait = self.waitForIndex or self.freshness in ("final", "strict")
        return wait, self.timeoutSeconds, self.allowStale and self.freshness != "strict"


class Paged(Consistency):
    cursor: str | None = Field(None, description="nextCursor of the previous page.")
    limit: int | None = Field(None, ge=1, json_schema_extra=_MAX_PAGE, description="Page size (default 100).")


class StatusArgs(NoArgs):
    model_config = ConfigDict(json_schema_extra=_compact)


class GetStatusArgs(Consistency):
    """`sage_get_status` takes `freshness` as every index-backed tool does (QA: an agent passing the
    `final` it uses everywhere else was refused with "takes no arguments"): `newest` reports at once,
    `final` after the final index, `strict` refuses with INDEX_STALE when the files differ from it."""


class FindAssetArgs(Paged):
    id: str = Field(description="Asset id (case-insensitive).")
    type: str | None = Field(None, description="Asset type, exact case (GameObject, WeaponTemplate…).")


class FindReferencesArgs(Paged):
    id: str = Field(description="Id of the asset whose users you want.")
    type: str | None = Field(None, description="Its type (base types accepted).")


class ListByTypeArgs(Paged):
    type: str = Field(description="Asset type, exact case.")
    prefix: str | None = Field(None, description="Only ids starting with this.")


class TypeIdArgs(Consistency):
    type: str = Field(description="Asset type, exact case.")
    id: str = Field(description="Asset id.")


class DefinitionArgs(TypeIdArgs):
    which: int | None = Field(None, ge=0, description="Which definition (0-based); default: the winner.")


class ResolveIncludeArgs(Consistency):
    source: str = Field(description="Include source as written (DATA:static.xml, Units/Tank.xml).")
    from_: str | None = Field(
        None, alias="from", description="File holding the include; default Data/Mod.xml."
    )


class FileArgs(Consistency):
    path: str = Field(description="File path, relative to the project or absolute.")


class DefineArgs(Paged):
    name: str = Field(description="Define name, with or without $.")


class UnreferencedArgs(Paged):
    type: str | None = Field(None, description="Only this asset type.")
    includeSdk: bool = Field(False, description="Also list vanilla SDK assets.")


class AssetReferencesArgs(TypeIdArgs):
    depth: int = Field(forward.DEPTH_DEFAULT, ge=1, le=forward.DEPTH_MAX, description="Hops (1..3).")
    targetTypes: list[str] | None = Field(
        None,
        description='Return only edges to these types (the walk goes through all), e.g. ["WeaponTemplate"].',
    )
    includeInheritance: bool = Field(False, description="Also return the inheritFrom edges.")
    maxEdges: int = Field(
        forward.MAX_EDGES_DEFAULT,
        ge=1,
        json_schema_extra={"maximum": forward.MAX_EDGES_LIMIT},
        description="Page size (default 100).",
    )
    cursor: str | None = Field(None, description="nextCursor of the previous page.")


class EffectiveArgs(TypeIdArgs):
    cursor: str | None = Field(None, description="nextCursor of the previous page of elements.")
    limit: int | None = Field(
        None, ge=1, json_schema_extra=_MAX_PAGE, description="Elements per page (default 100)."
    )


class DiagnosticsArgs(Paged):
    code: str | None = Field(None, description="Only this code (include-not-found, parse-error…).")
    file: str | None = Field(None, description="Only this file.")
    origin: Literal["project", "sdk"] | None = Field(
        None, description="Only the mod's own (project) or the SDK's vanilla XML's; default both, mod first."
    )


def sage_tools(service: SageService) -> list[ToolSpec]:
    """Every sage tool bound to one opened project."""

    async def idx(args: Consistency) -> Any:
        return await service.usable_index(*args.consistency())

    async def get_status(ctx: CallContext, args: GetStatusArgs) -> dict[str, Any]:
        wait, _timeout, allow_stale = args.consistency()
        if wait or not allow_stale:
            # Only when asked: `newest` must report even without a usable index (building, error).
            await idx(args)
        body: dict[str, Any] = {
            "sdk": str(service.sdk) if service.sdk else None,
            "searchPaths": {
                "DATA": service.search.data,
                "ART": service.search.art,
                "AUDIO": service.search.audio,
                "ROOT": service.search.root,
            },
        }
        index = service.index
        if index is not None:
            body["streams"] = {n: index.display(e) for n, e in index.streams.items()}
            body["stats"] = dict(index.stats)
            body["diagnostics"] = queries.diagnostic_counts(index)
            body["assetTypes"] = queries.asset_type_counts(index)
        body["snapshot"] = str(service.last_snapshot) if service.last_snapshot else None
        return service.answer(body)

    async def list_projects(ctx: CallContext, args: StatusArgs) -> dict[str, Any]:
        snaps = list_snapshots(service.data_dir)
        return service.answer({"open": [service.status()], "snapshots": snaps[:LIST_PAGE_MAX]})

    async def find_asset(ctx: CallContext, a: FindAssetArgs) -> dict[str, Any]:
        return service.answer(queries.find_asset(await idx(a), a.id, a.type, a.cursor, a.limit))

    async def find_references(ctx: CallContext, a: FindReferencesArgs) -> dict[str, Any]:
        return service.answer(queries.find_references(await idx(a), a.id, a.type, a.cursor, a.limit))

    async def list_by_type(ctx: CallContext, a: ListByTypeArgs) -> dict[str, Any]:
        return service.answer(queries.list_assets_by_type(await idx(a), a.type, a.prefix, a.cursor, a.limit))

    async def get_definition(ctx: CallContext, a: DefinitionArgs) -> dict[str, Any]:
        return service.answer(queries.get_definition(await idx(a), a.type, a.id, a.which))

    async def resolve_include(ctx: CallContext, a: ResolveIncludeArgs) -> dict[str, Any]:
        return service.answer(queries.resolve_include(await idx(a), service.resolver, a.source, a.from_))

    async def is_file_active(ctx: CallContext, a: FileArgs) -> dict[str, Any]:
        return service.answer(queries.is_file_active(await idx(a), a.path))

    async def find_define(ctx: CallContext, a: DefineArgs) -> dict[str, Any]:
        return service.answer(queries.find_define(await idx(a), a.name, a.cursor, a.limit))

    async def unreferenced(ctx: CallContext, a: UnreferencedArgs) -> dict[str, Any]:
        return service.answer(queries.unreferenced(await idx(a), a.type, a.includeSdk, a.cursor, a.limit))

    async def chain(ctx: CallContext, a: TypeIdArgs) -> dict[str, Any]:
        return service.answer(queries.get_inheritance_chain(await idx(a), a.type, a.id))

    async def usage_guide(ctx: CallContext, args: StatusArgs) -> dict[str, Any]:
        return service.answer({"guide": USAGE_GUIDE})

    async def asset_references(ctx: CallContext, a: AssetReferencesArgs) -> dict[str, Any]:
        return service.answer(
            forward.get_asset_references(
                await idx(a), a.type, a.id, a.depth, a.targetTypes, a.maxEdges, a.includeInheritance, a.cursor
            )
        )

    async def effective_asset(ctx: CallContext, a: EffectiveArgs) -> dict[str, Any]:
        return service.answer(effective.get_effective_asset(await idx(a), a.type, a.id, a.cursor, a.limit))

    async def diagnostics(ctx: CallContext, a: DiagnosticsArgs) -> dict[str, Any]:
        return service.answer(
            queries.list_diagnostics(await idx(a), a.code, a.file, a.cursor, a.limit, a.origin)
        )

    def spec(name: str, title: str, description: str, args: type[ToolArgs], handler: Any) -> ToolSpec:
        async def named(ctx: CallContext, a: Any) -> dict[str, Any]:
            try:
                return await handler(ctx, a)
            except BridgeError as exc:
                # Hints say which sage tool to call next; `{tool}` is the one that was just called.
                exc.hint = exc.hint.replace("{tool}", name)
                raise

        return ToolSpec(
            name=name,
            title=title,
            description=description,
            args=args,
            handler=named,
            read_only=True,
            idempotent=True,
        )

    return [
        spec(
            "sage_get_status",
            "Index status",
            "Index state (building, ready_xml, ready, stale, error), project and SDK, counts per asset "
            "type and diagnostic code. Call first when unsure the workspace is a SAGE mod.",
            GetStatusArgs,
            get_status,
        ),
        spec(
            "sage_list_projects",
            "Indexed projects",
            "Projects open here and projects with a saved snapshot.",
            StatusArgs,
            list_projects,
        ),
        spec(
            "sage_find_asset",
            "Find asset definitions",
            "Every definition of an id (overrides and copies are normal): file, line, origin, streams.",
            FindAssetArgs,
            find_asset,
        ),
        spec(
            "sage_find_references",
            "Find references to an asset",
            "Every place that references an asset, with element, attribute and the asset holding it.",
            FindReferencesArgs,
            find_references,
        ),
        spec(
            "sage_list_assets_by_type",
            "List assets of a type",
            "Ids of one asset type, by prefix, sorted.",
            ListByTypeArgs,
            list_by_type,
        ),
        spec(
            "sage_get_definition",
            "Show an asset's XML",
            "The winning definition of (type, id) as written: file, lines, XML excerpt.",
            DefinitionArgs,
            get_definition,
        ),
        spec(
            "sage_get_effective_asset",
            "Merged asset",
            "(type, id) as the game sees it: the inheritFrom chain and xai:joinAction Replace/Remove/merge "
            "applied, with the file and line every element comes from.",
            EffectiveArgs,
            effective_asset,
        ),
        spec(
            "sage_resolve_include",
            "Resolve an include path",
            "Where an include source (DATA:, ART:, AUDIO:, ROOT:, relative) points, and if that file is active.",
            ResolveIncludeArgs,
            resolve_include,
        ),
        spec(
            "sage_is_file_active",
            "Is a file used?",
            "Which streams include a file and how (all, instance, reference); inactive files do nothing in game.",
            FileArgs,
            is_file_active,
        ),
        spec(
            "sage_find_define",
            "Find a $DEFINE",
            "Definitions of a define name with values and locations.",
            DefineArgs,
            find_define,
        ),
        spec(
            "sage_unreferenced",
            "Unreferenced assets",
            "Project assets nothing references (inheritFrom counts; self-overrides do not).",
            UnreferencedArgs,
            unreferenced,
        ),
        spec(
            "sage_get_inheritance_chain",
            "Inheritance chain",
            "The inheritFrom chain of an asset (up to 8 links) with files and lines.",
            TypeIdArgs,
            chain,
        ),
        spec(
            "sage_get_usage_guide",
            "How to use the sage tools",
            "When these tools apply, and recipes for common questions.",
            StatusArgs,
            usage_guide,
        ),
        spec(
            "sage_get_asset_references",
            "What an asset uses",
            "Forward references as edges with provenance (element, attribute, file, line, definedIn, path "
            "from the start asset), up to 3 hops, paged.",
            AssetReferencesArgs,
            asset_references,
        ),
        spec(
            "sage_list_diagnostics",
            "Index diagnostics",
            "Problems found while indexing (include-not-found, parse-error, unresolved-reference…).",
            DiagnosticsArgs,
            diagnostics,
        ),
    ]
