"""Forward references of one asset ("what does this unit use?") as a paged list of edges with provenance.

Design (seed ra3-mod-xml-agent-plan §9, issue 12): edges, not a flat closure — each says which element and
attribute made the reference, where that XML is, which ancestor wrote it when it was inherited through
`inheritFrom` (`definedIn`), the include site when it sits in an `xi:include`d fragment (`includedAt`), and
the chain of via-edges from the start asset (`path`). `depth` defaults to 1 and stops at 3; the
`inheritFrom` chain (≤ 8 links) is walked within the same depth because inheritance is part of the asset,
not a use of another one. `targetTypes` filters what is *returned*, never what is *walked*: a weapon fired
by an object that a death `ObjectCreationList` spawns is three hops away and is found with
`targetTypes: ["WeaponTemplate"], depth: 3`. `inheritFrom` edges are returned only with
`includeInheritance` (then all of them, whatever `targetTypes` says). `maxEdges` is the page size; the rest follow with `cursor`. `xai:joinAction` merges
are not evaluated here (`sage_get_effective_asset` does that).
"""

from __future__ import annotations

from typing import Any

from deskbridge.core import paging
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.sage.model import AssetDef, SageIndex
from deskbridge.kinds.sage.queries import (
    INHERITANCE_MAX,
    TOOL,
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
VISIT_MAX = 20000
"""Assets expanded at most in one call, whatever the depth (keeps depth 3 on a big unit bounded)."""

# One edge while walking: (level, node, definedIn, file, ref, target, include site, path to node).
_Edge = tuple[int, AssetDef, AssetDef, str, Ref, AssetDef | None, tuple[str, int] | None, tuple[Any, ...]]


def _key(d: AssetDef) -> dict[str, str]:
    return {"type": d.type, "id": d.id}


def get_asset_references(
    index: SageIndex,
    asset_type: str,
    ident: str,
    depth: int = DEPTH_DEFAULT,
    target_types: list[str] | None = None,
    max_edges: int = MAX_EDGES_DEFAULT,
    include_inheritance: bool = False,
    cursor: str | None = None,
) -> dict[str, Any]:
    if not 1 <= depth <= DEPTH_MAX:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"depth {depth} is outside 1..{DEPTH_MAX}",
            hint="Call sage_get_asset_references with depth 1..3, then again on the edges you care about.",
        )
    if not 1 <= max_edges <= MAX_EDGES_LIMIT:
        raise BridgeError(
            ErrorCode.LIMIT_EXCEEDED,
            f"maxEdges {max_edges} is outside 1..{MAX_EDGES_LIMIT}",
            hint=f"maxEdges is a page size: call sage_get_asset_references with maxEdges at most "
            f"{MAX_EDGES_LIMIT} and pass each answer's nextCursor as cursor to get the next edges.",
        )
    wanted = list(target_types or [])  # base types (BaseAudioEventInfo) are fine: no asset-type check
    offset = paging.offset_of(cursor, tool=TOOL)
    defs = definitions(index, ident, asset_type)
    if not defs:
        raise _not_found(asset_type, ident)
    start = effective(index, defs)
    keep_cache: dict[str, bool] = {}

    def keep(t: str) -> bool:
        hit = keep_cache.get(t)
        if hit is None:
            hit = keep_cache[t] = not wanted or any(index.assignable(t, w) for w in wanted)
        return hit

    found: list[_Edge] = []
    counts: dict[str, int] = {}
    visited: set[int] = {id(start)}
    frontier: list[tuple[AssetDef, tuple[Any, ...]]] = [(start, ())]
    expanded = 0
    stopped_early = False
    for level in range(1, depth + 1):
        nxt: list[tuple[AssetDef, tuple[Any, ...]]] = []
        for node, path_to in frontier:
            expanded += 1
            if expanded > VISIT_MAX:
                stopped_early = True
                break
            cur: AssetDef | None = node
            hops = 0
            seen_chain: set[int] = set()
            while cur is not None and id(cur) not in seen_chain:
                seen_chain.add(id(cur))
                sites: list[tuple[str, Ref, tuple[str, int] | None]] = [
                    (cur.file, r, None) for r in index.refs_of(cur)
                ]
                sites.extend(index.fragment_refs_of(cur))
                parent: AssetDef | None = None
                for path, r, site in sites:
                    if r[R_KIND] == "inheritFrom":
                        _ref, parent = inherit_target(index, cur)
                        if include_inheritance:  # asked for explicitly: whatever targetTypes says
                            found.append((level, node, cur, path, r, parent, site, path_to))
                        continue
                    targets = index.resolve(r[R_TYPE], r[R_VALUE])
                    target = effective(index, targets) if targets else None
                    ttype = target.type if target else r[R_TYPE]
                    if keep(ttype):
                        found.append((level, node, cur, path, r, target, site, path_to))
                        counts[ttype] = counts.get(ttype, 0) + 1
                    if target is not None and level < depth and id(target) not in visited:
                        visited.add(id(target))
                        nxt.append((target, (*path_to, (node, cur, path, r, target))))
                hops += 1
                if hops > INHERITANCE_MAX:
                    break
                cur = parent
        frontier = nxt
        if stopped_early:
            break
    page = found[offset : offset + max_edges]
    more = offset + max_edges < len(found)
    return {
        "from": {"type": start.type, "id": start.id, "file": index.display(start.file), "line": start.line},
        "depth": depth,
        "targetTypes": wanted or None,
        "includeInheritance": include_inheritance,
        "edges": [_edge(index, e) for e in page],
        "edgeCount": len(page),
        "total": len(found),
        "byTargetType": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        "nextCursor": paging.offset_cursor(offset + max_edges) if more else None,
        "truncated": stopped_early,
        "note": "Values are as written; xai:joinAction merges (Replace/Remove) are not applied: "
        "call sage_get_effective_asset for the merged asset.",
    }


def _asset_json(index: SageIndex, d: AssetDef | None) -> dict[str, Any] | None:
    if d is None:
        return None
    return {"type": d.type, "id": d.id, "file": index.display(d.file), "line": d.line}


def _edge(index: SageIndex, e: _Edge) -> dict[str, Any]:
    level, node, cur, path, r, target, site, path_to = e
    return {
        "from": _key(node),
        "to": _asset_json(index, target),
        "target": {"type": r[R_TYPE], "id": r[R_VALUE]},
        "via": {
            "kind": r[R_KIND],
            "element": r[R_ELEMENT],
            "parent": r[R_PARENT] or None,
            "attribute": r[R_ATTR] or None,
        },
        "source": {"file": index.display(path), "line": r[R_LINE], "column": r[R_COL]},
        "definedIn": _key(cur) if cur is not node else None,
        "includedAt": {"file": index.display(site[0]), "line": site[1]} if site else None,
        "depth": level,
        "path": [
            {
                "from": _key(pn),
                "to": _key(pt),
                "element": pr[R_ELEMENT],
                "attribute": pr[R_ATTR] or None,
                "file": index.display(pp),
                "line": pr[R_LINE],
                **({"definedIn": _key(pc)} if pc is not pn else {}),
            }
            for pn, pc, pp, pr, pt in path_to
        ],
    }
