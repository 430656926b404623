"""Read-only questions answered from one `SageIndex`: definitions, references, includes, defines, streams.

Every list is paginated with an opaque cursor and never dumps the whole index. Functions raise
`BridgeError` for business errors, with a hint naming the tool to call next.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Final

from deskbridge.core import limits, paging
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.reading import read_regular_file
from deskbridge.kinds.sage._lxml import etree
from deskbridge.kinds.sage.model import SPLICED_ROOT, AssetDef, Owner, SageIndex, outside_error
from deskbridge.kinds.sage.paths import OUTSIDE
from deskbridge.kinds.sage.records import (
    FILE_MAX_BYTES,
    R_ASSET,
    R_ATTR,
    R_COL,
    R_ELEMENT,
    R_END,
    R_KIND,
    R_LINE,
    R_PARENT,
    R_TYPE,
    R_VALUE,
    Ref,
    decode_text,
)

EXCERPT_MAX_LINES = 400
"""Lines of XML returned by `get_definition` at most; longer definitions say `truncated`."""
EXCERPT_MAX_BYTES = 32 * 1024
INHERITANCE_MAX = 8
"""Links followed by `get_inheritance_chain` (and by forward references), as BAB chains stay short."""


# --- pagination ---------------------------------------------------------------------------------------
TOOL: Final = "{tool}"
"""What hints call the tool that was just called (sage's tools.py puts its name in)."""


def check_limit(limit: int | None) -> int:
    if limit is None:
        return limits.LIST_PAGE_DEFAULT
    if limit < 1 or limit > limits.LIST_PAGE_MAX:
        raise BridgeError(
            ErrorCode.LIMIT_EXCEEDED,
            f"limit {limit} is outside 1..{limits.LIST_PAGE_MAX}",
            hint=f"Call {{tool}} with limit at most {limits.LIST_PAGE_MAX} and follow nextCursor.",
        )
    return limit


def page(items: list[Any], cursor: str | None, limit: int | None) -> dict[str, Any]:
    chunk, next_cursor, _start = paging.page(items, cursor, check_limit(limit), tool=TOOL)
    return {"items": list(chunk), "total": len(items), "nextCursor": next_cursor}


# --- shapes -------------------------------------------------------------------------------------------
def asset_json(index: SageIndex, d: AssetDef) -> dict[str, Any]:
    streams = index.streams_of(d.file) if d.file else {}
    out: dict[str, Any] = {
        "type": d.type,
        "id": d.id,
        "file": index.display(d.file),
        "line": d.line,
        "origin": d.origin,
        "streams": streams,
        "viaInstance": bool(streams) and "all" not in streams.values(),
    }
    if d.manifest:
        out["manifest"] = d.manifest
        out["manifestSource"] = d.source
    return out


def owner_json(index: SageIndex, owner: Owner | None) -> dict[str, Any] | None:
    if owner is None:
        return None
    out: dict[str, Any] = {"type": owner[0], "id": owner[1]}
    if owner[2]:
        out["viaFragment"] = index.display(owner[2])
    if owner[3]:
        out["includedAt"] = {"file": index.display(owner[3][0]), "line": owner[3][1]}
    return out


def owner_of(index: SageIndex, path: str, r: Ref) -> dict[str, Any] | None:
    owners = index.owners(path, r)
    return owner_json(index, owners[0]) if owners else None


def attributed(index: SageIndex, sites: Any) -> list[tuple[str, Ref, Owner | None]]:
    """Reference sites with the asset that holds each: a site in a fragment shared by several assets
    (`xi:include`d by each) appears once per including asset, with that asset's include site."""
    out: list[tuple[str, Ref, Owner | None]] = []
    files = index.files
    for path, r in sites:
        rec = files.get(path)
        if rec is not None and rec.root == "AssetDeclaration":
            a = rec.assets[r[R_ASSET]] if 0 <= r[R_ASSET] < len(rec.assets) else None
            out.append((path, r, (a[0], a[1], None, None) if a else None))
            continue
        owners = index.owners(path, r)
        if not owners:
            out.append((path, r, None))
        out.extend((path, r, o) for o in owners)
    return out


def site_json(
    index: SageIndex, path: str, r: Ref, owner: Owner | None = None, *, resolve: bool = True
) -> dict[str, Any]:
    return {
        "file": index.display(path),
        "line": r[R_LINE],
        "column": r[R_COL],
        "endColumn": r[R_END],
        "kind": r[R_KIND],
        "element": r[R_ELEMENT],
        "parent": r[R_PARENT] or None,
        "attribute": r[R_ATTR] or None,
        "targetType": r[R_TYPE],
        "value": r[R_VALUE],
        "from": owner_json(index, owner) if not resolve else owner_of(index, path, r),
    }


# --- lookups ------------------------------------------------------------------------------------------
def _check_type(index: SageIndex, asset_type: str | None) -> None:
    if asset_type is None or asset_type in index.assets:
        return
    known = set(index.assets) | set(index.model.asset_types if index.model else ())
    if asset_type in known:
        return
    close = difflib.get_close_matches(asset_type, sorted(known), n=5)
    folded = [t for t in known if t.casefold() == asset_type.casefold()]
    raise BridgeError(
        ErrorCode.NOT_FOUND,
        f"No asset type {asset_type!r} in this project or its schema (type names are case-sensitive).",
        hint="Use one of the suggested type names, or call sage_get_status for the types with definitions.",
        data={"candidates": list(dict.fromkeys(folded + close))},
    )


def definitions(index: SageIndex, ident: str, asset_type: str | None = None) -> list[AssetDef]:
    _check_type(index, asset_type)
    if asset_type is None:
        return list(index.by_id.get(ident.casefold(), ()))
    return list(index.assets.get(asset_type, {}).get(ident.casefold(), ()))


def effective(index: SageIndex, defs: list[AssetDef]) -> AssetDef:
    """The definition that wins: the last one compiled into a stream (`all`), else the last visible one.
    Later documents override earlier ones in BAB's include order."""
    in_stream = [d for d in defs if "all" in index.streams_of(d.file).values()]
    return (in_stream or defs)[-1]


def find_asset(
    index: SageIndex,
    ident: str,
    asset_type: str | None = None,
    cursor: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    defs = definitions(index, ident, asset_type)
    inactive = [
        d for d in index.inactive.get(ident.casefold(), ()) if asset_type is None or d.type == asset_type
    ]
    rows = [asset_json(index, d) for d in defs]
    for d in inactive:
        row = asset_json(index, d)
        row["warning"] = (
            "No stream includes this file: editing it has no effect in game until an include pulls it in "
            "(sage_is_file_active tells which files are used)."
        )
        rows.append(row)
    out = page(rows, cursor, limit)
    out["id"] = ident
    out["live"] = len(defs)
    if inactive:
        out["inactive"] = len(inactive)
    if not defs and not inactive:
        out["hint"] = "No definition: check the id's spelling, or search with sage_list_assets_by_type."
    return out


def find_references(
    index: SageIndex,
    ident: str,
    asset_type: str | None = None,
    cursor: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    _check_type(index, asset_type)
    sites = index.refs_to.get(ident.casefold(), ())
    if asset_type is not None:
        sites = [s for s in sites if index.assignable(asset_type, s[1][R_TYPE])]
    rows = attributed(index, sites)
    start = paging.offset_of(cursor, tool=TOOL)
    n = check_limit(limit)
    chunk = rows[start : start + n]
    nxt = start + n if start + n < len(rows) else None
    out = {
        "id": ident,
        "type": asset_type,
        "items": [site_json(index, p, r, o, resolve=False) for p, r, o in chunk],
        "total": len(rows),
        "nextCursor": paging.offset_cursor(nxt) if nxt is not None else None,
    }
    if not rows and not index.by_id.get(ident.casefold()) and not index.inactive.get(ident.casefold()):
        out["hint"] = NO_SUCH_ID
    return out


NO_SUCH_ID = (
    "No asset has this id and nothing references it: check the spelling with sage_find_asset or "
    "sage_list_assets_by_type (ids are case-insensitive)."
)
"""Said with an empty list of references when the id is not defined either (a typo, not an unused asset)."""


def list_assets_by_type(
    index: SageIndex,
    asset_type: str,
    prefix: str | None = None,
    cursor: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    _check_type(index, asset_type)
    by_key = index.assets.get(asset_type, {})
    pf = (prefix or "").casefold()
    keys = sorted(k for k in by_key if k.startswith(pf))
    rows = []
    start = paging.offset_of(cursor, tool=TOOL)
    n = check_limit(limit)
    for k in keys[start : start + n]:
        defs = by_key[k]
        eff = effective(index, defs)
        rows.append(
            {
                "id": eff.id,
                "definitions": len(defs),
                "file": index.display(eff.file),
                "line": eff.line,
                "origin": eff.origin,
            }
        )
    nxt = start + n if start + n < len(keys) else None
    return {
        "type": asset_type,
        "prefix": prefix,
        "items": rows,
        "total": len(keys),
        "nextCursor": paging.offset_cursor(nxt) if nxt is not None else None,
    }


def _not_found(asset_type: str, ident: str) -> BridgeError:
    return BridgeError(
        ErrorCode.NOT_FOUND,
        f"No definition of {asset_type} {ident!r}.",
        hint="Call sage_find_asset with the id alone to see which types define it.",
    )


def get_definition(index: SageIndex, asset_type: str, ident: str, which: int | None = None) -> dict[str, Any]:
    defs = definitions(index, ident, asset_type)
    if not defs:
        raise _not_found(asset_type, ident)
    if which is not None and not 0 <= which < len(defs):
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"which={which} but there are {len(defs)} definitions",
            hint=f"Call {{tool}} with which between 0 and {len(defs) - 1}, or sage_find_asset to list them.",
        )
    d = defs[which] if which is not None else effective(index, defs)
    out = asset_json(index, d)
    out["definitionCount"] = len(defs)
    out["which"] = defs.index(d)
    if not d.file:
        out.update(
            startLine=None,
            endLine=None,
            excerpt=None,
            note="Defined only in a compiled manifest; there is no XML to show.",
        )
        return out
    index.check_scope(d.file, index.display(d.file))
    start, end, excerpt, truncated = _excerpt(d.file, d.line, d.type, index.display(d.file))
    out.update(startLine=start, endLine=end, excerpt=excerpt, truncated=truncated)
    rec = index.files.get(d.file)
    # xai:joinAction edits (Replace/Remove/Append) change what the parent asset's children become.
    out["joinActions"] = [
        {"element": e, "action": a, "line": ln}
        for e, a, ln in (rec.joins if rec else ())
        if start <= ln <= end
    ][: limits.LIST_PAGE_DEFAULT]
    return out


def _excerpt(path: str, line: int, element: str, shown: str) -> tuple[int, int, str, bool]:
    """Lines of one top-level element: found by reparsing the file (one file, on demand)."""
    try:
        data = read_regular_file(path, max_bytes=FILE_MAX_BYTES, shown_as=shown)
    except BridgeError as exc:
        raise BridgeError(
            exc.code,
            exc.message,
            hint="The file changed on disk; call sage_get_status until the re-index is done, then retry.",
        ) from None
    lines = decode_text(data).split("\n")
    end = line
    try:
        root = etree.fromstring(
            data, etree.XMLParser(recover=True, huge_tree=True, resolve_entities=False, no_network=True)
        )
        children = [c for c in root.iterchildren(tag=etree.Element)] if root is not None else []
        for i, c in enumerate(children):
            if (c.sourceline or 0) >= line and c.tag.rpartition("}")[2] == element:
                nxt = children[i + 1].sourceline if i + 1 < len(children) else None
                tail = etree.tostring(c, encoding="unicode", with_tail=False).count("\n")
                end = (c.sourceline or line) + tail
                if nxt is not None:
                    end = min(end, nxt - 1)
                break
    except etree.XMLSyntaxError:
        pass
    end = max(end, line)
    text_lines = lines[line - 1 : end]
    if (
        text_lines
    ):  # a CRLF file's last line keeps its "\r" after the split on "\n"; the lines within keep theirs
        text_lines[-1] = text_lines[-1].removesuffix("\r")
    truncated = False
    if len(text_lines) > EXCERPT_MAX_LINES:
        text_lines, truncated = text_lines[:EXCERPT_MAX_LINES], True
    text = "\n".join(text_lines)
    if len(text.encode()) > EXCERPT_MAX_BYTES:
        text, truncated = text.encode()[:EXCERPT_MAX_BYTES].decode(errors="ignore"), True
    return line, end, text, truncated


def resolve_include(
    index: SageIndex, resolver: Any, source: str, from_file: str | None = None
) -> dict[str, Any]:
    base = (
        index.real_path(from_file)
        if from_file
        else index.streams.get("static") or str(index.project / "Data" / "Mod.xml")
    )
    if from_file:
        index.check_scope(base, from_file)
    target = resolver.resolve_checked(source, base)
    if target == OUTSIDE:
        raise outside_error(source)
    alias = source.partition(":")[0].casefold() if ":" in source and len(source.partition(":")[0]) > 1 else ""
    searched = (
        resolver.search.for_alias(alias)
        if alias in ("data", "art", "audio", "root")
        else [str(Path(base).parent)]
    )
    out: dict[str, Any] = {
        "source": source,
        "from": index.display(base),
        "resolved": index.display(target) if target else None,
        "searchPaths": [index.display(p) or p for p in searched],
    }
    if target:
        out["active"] = bool(index.streams_of(target))
        out["streams"] = index.streams_of(target)
    elif (folder := resolver.resolve_folder(source, base)) is not None:
        out["folder"] = index.display(folder)
        out["hint"] = (
            f"{source!r} names a folder ({out['folder']}), not a file: an include reads one XML file. Name a "
            "file in that folder, then call sage_resolve_include again."
        )
    else:
        out["hint"] = (
            "Nothing matches in the search paths (case-insensitive). Check the path, or the SDK "
            "and searchPaths configuration."
        )
    return out


def is_file_active(index: SageIndex, path: str) -> dict[str, Any]:
    real = index.real_path(path)
    index.check_scope(real, path)
    found = real if real in index.membership else None
    if found is None:
        folded = real.casefold()
        found = next((p for p in index.membership if p.casefold() == folded), None)
    included_by = [
        {"file": index.display(e.file), "line": e.line, "kind": e.kind, "source": e.source}
        for e in index.includes
        if found is not None and e.target == found
    ][: limits.LIST_PAGE_DEFAULT]
    streams = index.membership.get(found, {}) if found else {}
    out = {
        "path": index.display(found or real),
        "active": bool(streams),
        "streams": [{"stream": s, "how": how} for s, how in streams.items()],
        "compiled": any(how == "all" for how in streams.values()),
        "includedBy": included_by,
        "note": None if streams else "No stream includes this file: edits to it have no effect in game.",
    }
    unreadable = next(
        (d.message for d in index.diagnostics if d.file == found and d.code == "unreadable-file"), None
    )
    if found is not None and unreadable:
        # Included, yet nothing of it is indexed (and BAB cannot read it either): say so, not just "active".
        out["unreadable"] = unreadable
        out["note"] = (
            "Included, but the file could not be read, so none of its assets are indexed; fix it "
            "(see unreadable), then call sage_get_status until the re-index is done."
        )
    return out


def find_define(
    index: SageIndex, name: str, cursor: str | None = None, limit: int | None = None
) -> dict[str, Any]:
    defs = index.defines.get(name.lstrip("$").casefold(), [])
    rows = [
        {
            "name": d.name,
            "value": d.value,
            "file": index.display(d.file),
            "line": d.line,
            "override": d.override,
            "exactCase": d.name == name.lstrip("$"),
        }
        for d in defs
    ]
    out = page(rows, cursor, limit)
    out["name"] = name
    if not rows:
        out.update(define_not_found(name, {k: v[0].name for k, v in index.defines.items() if v}))
    return out


def define_not_found(name: str, known: dict[str, str]) -> dict[str, Any]:
    """What an empty `find_define` adds: the defined names (case-folded → as written) closest to `name`,
    since the likely cause is a typo, and what to do."""
    close = difflib.get_close_matches(name.lstrip("$").casefold(), list(known), n=5)
    return {
        "candidates": [known[k] for k in close],
        "hint": "No define has this name. Call sage_find_define with one of the candidates, or check the "
        "spelling (names are case-insensitive; the $ is optional).",
    }


def unreferenced(
    index: SageIndex,
    asset_type: str | None = None,
    include_sdk: bool = False,
    cursor: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """Project definitions nothing references (inheritFrom counts as a reference).

    Without a type, only types the schema lets something reference are listed: most of the ~290 asset
    types (settings, map metadata, art sub-structures) are never referenced by design (research/sage.md
    §1.4), and listing them would bury the answer."""
    _check_type(index, asset_type)
    if asset_type:
        types = [asset_type]
    else:
        targets = index.model.reference_targets() if index.model else set()
        types = [t for t in sorted(index.assets) if not targets or index.type_chain(t) & targets]
    rows = []
    for t in types:
        for key, defs in sorted(index.assets.get(t, {}).items()):
            d = defs[-1]
            if not include_sdk and not any(x.origin == "project" for x in defs):
                continue
            sites = index.refs_to.get(key, ())
            if any(
                index.assignable(t, r[R_TYPE]) and not _self_override(index, p, r, t, key) for p, r in sites
            ):
                continue
            rows.append(
                {"type": t, "id": d.id, "file": index.display(d.file), "line": d.line, "origin": d.origin}
            )
    out = page(rows, cursor, limit)
    out["type"] = asset_type
    return out


def _self_override(index: SageIndex, path: str, r: Ref, asset_type: str, key: str) -> bool:
    """`<X id="A" inheritFrom="A">` names the asset it overrides, not a use of it."""
    if r[R_KIND] != "inheritFrom":
        return False
    owner = index.owner(path, r)
    return owner is not None and owner[1].casefold() == key


def inherit_target(index: SageIndex, d: AssetDef) -> tuple[Ref | None, AssetDef | None]:
    """The `inheritFrom` of one definition and what it resolves to (self-inheritance skips itself)."""
    rec = index.files.get(d.file)
    if rec is None:
        return None, None
    own = 0 if d.index == SPLICED_ROOT else d.index  # a spliced root element is `spliceable[0]`
    ref = next((r for r in rec.refs if r[R_ASSET] == own and r[R_KIND] == "inheritFrom"), None)
    if ref is None:
        return None, None
    cands = [c for c in index.resolve(ref[R_TYPE], ref[R_VALUE]) if c is not d]
    if not cands:
        return ref, None
    if ref[R_VALUE].casefold() == d.id.casefold():
        # An override: BAB looks past Self, so take the definition visible before this one.
        earlier = [c for c in cands if c.origin != "project" or c.file != d.file]
        return ref, (earlier or cands)[0]
    return ref, effective(index, cands)


def get_inheritance_chain(index: SageIndex, asset_type: str, ident: str) -> dict[str, Any]:
    defs = definitions(index, ident, asset_type)
    if not defs:
        raise _not_found(asset_type, ident)
    d: AssetDef | None = effective(index, defs)
    chain = []
    seen: set[int] = set()
    stop = "root"
    while d is not None:
        if id(d) in seen:
            stop = "cycle"
            break
        seen.add(id(d))
        ref, parent = inherit_target(index, d)
        step = asset_json(index, d)
        step["inheritFrom"] = f"{ref[R_TYPE]}:{ref[R_VALUE]}" if ref else None
        chain.append(step)
        if ref is None:
            break
        if parent is None:
            stop = "missing"
            break
        if len(chain) >= INHERITANCE_MAX:
            stop = "limit"
            break
        d = parent
    return {"type": asset_type, "id": ident, "chain": chain, "stop": stop}


def list_diagnostics(
    index: SageIndex,
    code: str | None = None,
    file: str | None = None,
    cursor: str | None = None,
    limit: int | None = None,
    origin: str | None = None,
) -> dict[str, Any]:
    """Diagnostics, the mod's own first (an SDK's vanilla XML brings thousands of warnings about art EA
    does not ship, which would otherwise fill the first pages), optionally of one origin only."""
    if origin not in (None, "project", "sdk"):
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"origin {origin!r} is neither project nor sdk",
            hint="Call {tool} with origin project (the mod's own files), sdk, or without it for both.",
        )
    diags = (
        index.all_diagnostics()
        if code in (None, "unresolved-reference", "unresolved-reference-indexing")
        else index.diagnostics
    )
    real = index.real_path(file) if file else None
    if real is not None and file is not None:
        index.check_scope(real, file)
    rows = [
        {
            "file": index.display(d.file),
            "line": d.line,
            "code": d.code,
            "severity": d.severity,
            "message": d.message,
            "origin": index.origin_of(d.file) if d.file else "project",  # no file: about the project itself
        }
        for d in diags
        if (code is None or d.code == code) and (real is None or d.file == real)
    ]
    rows = [r for r in rows if origin is None or r["origin"] == origin]
    rows.sort(key=lambda r: r["origin"] != "project")  # stable: walk order within each origin
    out = page(rows, cursor, limit)
    out["code"] = code
    return out


def diagnostic_counts(index: SageIndex) -> dict[str, int]:
    counts: dict[str, int] = {}
    for d in index.diagnostics:
        counts[d.code] = counts.get(d.code, 0) + 1
    code, unresolved = index.unresolved_count()  # counted without locating any reference row
    if unresolved:
        counts[code] = counts.get(code, 0) + unresolved
    return counts


def asset_type_counts(index: SageIndex) -> dict[str, int]:
    return {t: sum(len(v) for v in ids.values()) for t, ids in sorted(index.assets.items())}
