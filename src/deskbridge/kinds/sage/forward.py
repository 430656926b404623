"""Forward references of one asset ("what does this unit use?") as a bounded list of edges with provenance.

Design (seed ra3-mod-xml-agent-plan §9): edges, not a flat closure — each says which element and attribute
made the reference, where that XML is, and (`definedIn`) which ancestor wrote it when it was inherited
through `inheritFrom`. `depth` defaults to 1 and stops at 3; the `inheritFrom` chain (≤ 8 links) is walked
within the same depth because inheritance is part of the asset, not a use of another one; `targetTypes`
keeps only edges whose target is assignable to one of the given types; `maxEdges` truncates and
`omittedByTargetType` says what was cut. `xai:joinAction` merges are not evaluated.
"""

from __future__ import annotations

from typing import Any

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.sage.model import AssetDef, SageIndex
from deskbridge.kinds.sage.queries import (
    INHERITANCE_MAX,
    _not_found,
    definitions,
    effective,
    inherit_target,
)
from deskbridge.kinds.sage.records import (
    R_ATTR,
    R_COL,
    R_ELEMENT,
    R_KIND,
    R_LINE,
    R_PARENT,
    R_TYPE,
    R_VALUE,
    Ref,
)

DEPTH_DEFAULT = 1
DEPTH_MAX = 3
MAX_EDGES_DEFAULT = 100
MAX_EDGES_LIMIT = 1000
VISIT_MAX = 2000
"""Assets expanded at most in one call, whatever the depth (keeps depth 3 on a big unit bounded)."""


def _key(d: AssetDef) -> dict[str, str]:
    return {"type": d.type, "id": d.id}


def get_asset_references(
    index: SageIndex,
    asset_type: str,
    ident: str,
    depth: int = DEPTH_DEFAULT,
    target_types: list[str] | None = None,
    max_edges: int = MAX_EDGES_DEFAULT,
) -> dict[str, Any]:
    if not 1 <= depth <= DEPTH_MAX:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"depth {depth} is outside 1..{DEPTH_MAX}",
            hint="Use depth 1 and call again on the edges you care about.",
        )
    if not 1 <= max_edges <= MAX_EDGES_LIMIT:
        raise BridgeError(
            ErrorCode.LIMIT_EXCEEDED,
            f"maxEdges {max_edges} is outside 1..{MAX_EDGES_LIMIT}",
            hint="Narrow with targetTypes instead of raising maxEdges.",
        )
    defs = definitions(index, ident, asset_type)
    if not defs:
        raise _not_found(asset_type, ident)
    start = effective(index, defs)
    wanted = list(target_types or [])

    def keep(t: str) -> bool:
        return not wanted or any(index.assignable(t, w) for w in wanted)

    edges: list[dict[str, Any]] = []
    omitted: dict[str, int] = {}
    visited: set[int] = {id(start)}
    frontier = [start]
    expanded = 0
    stopped_early = False
    for level in range(1, depth + 1):
        nxt: list[AssetDef] = []
        for node in frontier:
            expanded += 1
            if expanded > VISIT_MAX:
                stopped_early = True
                break
            cur: AssetDef | None = node
            hops = 0
            seen_chain: set[int] = set()
            while cur is not None and id(cur) not in seen_chain:
                seen_chain.add(id(cur))
                sites = [(cur.file, r) for r in index.refs_of(cur)] + index.fragment_refs_of(cur)
                parent: AssetDef | None = None
                for path, r in sites:
                    if r[R_KIND] == "inheritFrom":
                        _ref, parent = inherit_target(index, cur)
                        edge = _edge(index, node, cur, path, r, parent, level)
                        _add(edges, omitted, edge, max_edges, r[R_TYPE])
                        continue
                    targets = index.resolve(r[R_TYPE], r[R_VALUE])
                    target = effective(index, targets) if targets else None
                    ttype = target.type if target else r[R_TYPE]
                    if not keep(ttype):
                        continue
                    _add(edges, omitted, _edge(index, node, cur, path, r, target, level), max_edges, ttype)
                    if target is not None and id(target) not in visited:
                        visited.add(id(target))
                        nxt.append(target)
                hops += 1
                if hops > INHERITANCE_MAX:
                    break
                cur = parent
        frontier = nxt
        if stopped_early:
            break
    truncated = bool(omitted) or stopped_early
    return {
        "from": {"type": start.type, "id": start.id, "file": index.display(start.file), "line": start.line},
        "depth": depth,
        "targetTypes": wanted or None,
        "edges": edges,
        "edgeCount": len(edges),
        "truncated": truncated,
        "omittedByTargetType": omitted,
        "note": "Values are as written; xai:joinAction merges (Replace/Remove) are not applied.",
    }


def _add(
    edges: list[dict[str, Any]], omitted: dict[str, int], edge: dict[str, Any], max_edges: int, ttype: str
) -> None:
    if len(edges) < max_edges:
        edges.append(edge)
    else:
        omitted[ttype] = omitted.get(ttype, 0) + 1


def _edge(
    index: SageIndex, node: AssetDef, cur: AssetDef, path: str, r: Ref, target: AssetDef | None, level: int
) -> dict[str, Any]:
    return {
        "from": _key(node),
        "to": (
            {"type": target.type, "id": target.id, "file": index.display(target.file), "line": target.line}
            if target
            else None
        ),
        "target": {"type": r[R_TYPE], "id": r[R_VALUE]},
        "via": {
            "kind": r[R_KIND],
            "element": r[R_ELEMENT],
            "parent": r[R_PARENT] or None,
            "attribute": r[R_ATTR] or None,
        },
        "source": {"file": index.display(path), "line": r[R_LINE], "column": r[R_COL]},
        "definedIn": _key(cur) if cur is not node else None,
        "depth": level,
    }
