"""The `sage_*` tools: transport-neutral descriptions of every read-only query, served by the MCP layer."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from deskbridge.core.limits import LIST_PAGE_MAX
from deskbridge.core.tools import CallContext, NoArgs, ToolArgs, ToolSpec
from deskbridge.kinds.sage import forward, queries
from deskbridge.kinds.sage.guide import USAGE_GUIDE
from deskbridge.kinds.sage.service import SageService
from deskbridge.kinds.sage.snapshot import list_snapshots


class Consistency(ToolArgs):
    """How fresh the answer must be."""

    waitForIndex: bool = Field(
        False,
        description="Wait until the final index (XML and art, no pending changes) is ready before answering.",
    )
    timeoutSeconds: float | None = Field(
        None, description="How long waitForIndex waits (default 30, at most 300); NOT_READY when it runs out."
    )
    allowStale: bool = Field(
        True,
        description="false: refuse (INDEX_STALE) instead of answering from an "
        "index that is stale or still incomplete.",
    )


class Paged(Consistency):
    cursor: str | None = Field(
        None, description="nextCursor from the previous page; omit for the first page."
    )
    limit: int | None = Field(None, ge=1, le=LIST_PAGE_MAX, description="Items per page (default 100).")


class StatusArgs(NoArgs):
    pass


class FindAssetArgs(Paged):
    id: str = Field(description="Asset id, e.g. AlliedAntiVehicleVehicleTech1 (case-insensitive).")
    type: str | None = Field(None, description="Asset type, e.g. GameObject or WeaponTemplate (exact case).")


class FindReferencesArgs(Paged):
    id: str = Field(description="Id of the asset whose users you want (case-insensitive).")
    type: str | None = Field(
        None, description="Its type; keeps only references that can point at that type (base types accepted)."
    )


class ListByTypeArgs(Paged):
    type: str = Field(description="Asset type, exact case, e.g. WeaponTemplate.")
    prefix: str | None = Field(None, description="Only ids starting with this (case-insensitive).")


class DefinitionArgs(Consistency):
    type: str = Field(description="Asset type, exact case.")
    id: str = Field(description="Asset id (case-insensitive).")
    which: int | None = Field(
        None,
        ge=0,
        description="Pick one of several definitions (0-based, walk order); default: the one that wins.",
    )


class ResolveIncludeArgs(Consistency):
    source: str = Field(description="An include source as written, e.g. DATA:static.xml or Units/Tank.xml.")
    from_: str | None = Field(
        None,
        alias="from",
        description="The file that contains the include (relative "
        "to the project or absolute); default Data/Mod.xml.",
    )


class FileArgs(Consistency):
    path: str = Field(description="A file path, relative to the project (Data/…) or absolute.")


class DefineArgs(Paged):
    name: str = Field(description="Define name, with or without the leading $.")


class UnreferencedArgs(Paged):
    type: str | None = Field(None, description="Only this asset type.")
    includeSdk: bool = Field(False, description="Also list unreferenced vanilla SDK assets (noisy).")


class ChainArgs(Consistency):
    type: str = Field(description="Asset type, exact case.")
    id: str = Field(description="Asset id.")


class AssetReferencesArgs(Consistency):
    type: str = Field(description="Asset type, exact case, e.g. GameObject.")
    id: str = Field(description="Asset id.")
    depth: int = Field(
        forward.DEPTH_DEFAULT,
        ge=1,
        le=forward.DEPTH_MAX,
        description="Hops to follow (1..3); inheritFrom parents do not count as a hop.",
    )
    targetTypes: list[str] | None = Field(
        None, description='Keep only edges to these types (or their subtypes), e.g. ["WeaponTemplate"].'
    )
    maxEdges: int = Field(
        forward.MAX_EDGES_DEFAULT,
        ge=1,
        le=forward.MAX_EDGES_LIMIT,
        description="Edges returned at most; the rest are counted in omittedByTargetType.",
    )


class DiagnosticsArgs(Paged):
    code: str | None = Field(
        None,
        description="Only this code, e.g. include-not-found, parse-error, "
        "duplicate-define, duplicate-instance, unresolved-reference, include-cycle.",
    )
    file: str | None = Field(None, description="Only this file (relative to the project or absolute).")


def sage_tools(service: SageService) -> list[ToolSpec]:
    """Every sage tool bound to one opened project."""

    async def idx(args: Consistency) -> Any:
        return await service.usable_index(args.waitForIndex, args.timeoutSeconds, args.allowStale)

    async def get_status(ctx: CallContext, args: StatusArgs) -> dict[str, Any]:
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

    async def chain(ctx: CallContext, a: ChainArgs) -> dict[str, Any]:
        return service.answer(queries.get_inheritance_chain(await idx(a), a.type, a.id))

    async def usage_guide(ctx: CallContext, args: StatusArgs) -> dict[str, Any]:
        return service.answer({"guide": USAGE_GUIDE})

    async def asset_references(ctx: CallContext, a: AssetReferencesArgs) -> dict[str, Any]:
        return service.answer(
            forward.get_asset_references(await idx(a), a.type, a.id, a.depth, a.targetTypes, a.maxEdges)
        )

    async def diagnostics(ctx: CallContext, a: DiagnosticsArgs) -> dict[str, Any]:
        return service.answer(queries.list_diagnostics(await idx(a), a.code, a.file, a.cursor, a.limit))

    def spec(name: str, title: str, description: str, args: type[ToolArgs], handler: Any) -> ToolSpec:
        return ToolSpec(
            name=name,
            title=title,
            description=description,
            args=args,
            handler=handler,
            read_only=True,
            idempotent=True,
        )

    return [
        spec(
            "sage_get_status",
            "Index status",
            "State of the mod index (building, ready_xml, ready, stale, "
            "error), the project and SDK it covers, counts per asset type and per diagnostic code. Call "
            "first when unsure the workspace is a SAGE mod.",
            StatusArgs,
            get_status,
        ),
        spec(
            "sage_list_projects",
            "Indexed projects",
            "Projects open in this server and projects with a saved snapshot.",
            StatusArgs,
            list_projects,
        ),
        spec(
            "sage_find_asset",
            "Find asset definitions",
            "Every definition of an asset id (several are "
            "normal: overrides and copies), with file, line, origin and stream membership.",
            FindAssetArgs,
            find_asset,
        ),
        spec(
            "sage_find_references",
            "Find references to an asset",
            "Every place that references an asset: "
            "file, line, column, element, attribute and the asset that holds the reference.",
            FindReferencesArgs,
            find_references,
        ),
        spec(
            "sage_list_assets_by_type",
            "List assets of a type",
            "Ids of one asset type, optionally by prefix, sorted, paginated.",
            ListByTypeArgs,
            list_by_type,
        ),
        spec(
            "sage_get_definition",
            "Show an asset's XML",
            "The winning definition of (type, id): file, line range and the XML excerpt.",
            DefinitionArgs,
            get_definition,
        ),
        spec(
            "sage_resolve_include",
            "Resolve an include path",
            "Where an include source (DATA:, ART:, "
            "AUDIO:, ROOT: or relative) points, matched case-insensitively, and whether that file is active.",
            ResolveIncludeArgs,
            resolve_include,
        ),
        spec(
            "sage_is_file_active",
            "Is a file used?",
            "Which streams include a file and how (all, instance, "
            "reference), and which includes pull it in. Inactive files have no effect in game.",
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
            "The inheritFrom chain of an asset up to 8 links, each with its file and line.",
            ChainArgs,
            chain,
        ),
        spec(
            "sage_get_usage_guide",
            "How to use the sage tools",
            "When these tools apply and recipes for common questions.",
            StatusArgs,
            usage_guide,
        ),
        spec(
            "sage_get_asset_references",
            "What an asset uses",
            "Forward references of an asset as edges "
            "with provenance (element, attribute, file, line, definedIn for inherited ones); depth 1 by "
            "default, 3 at most; filter with targetTypes.",
            AssetReferencesArgs,
            asset_references,
        ),
        spec(
            "sage_list_diagnostics",
            "Index diagnostics",
            "Problems found while indexing: include-not-found, "
            "include-cycle, parse-error, duplicate-define, duplicate-instance, unresolved-reference …",
            DiagnosticsArgs,
            diagnostics,
        ),
    ]
