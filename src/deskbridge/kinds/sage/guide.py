"""The usage guide an agent reads once (`sage_get_usage_guide`): when these tools apply and how to use them."""

USAGE_GUIDE = """\
# SAGE mod index (Red Alert 3 / C&C3 / Kane's Wrath mod XML)

## When this applies
Use these tools when the workspace is a SAGE-engine mod: it has `Data/Mod.xml`,
`Data/additionalmaps/mapmetadata_*.xml` or a `*.babproj`, and its XML files start with
`<AssetDeclaration xmlns="uri:ea.com:eala:asset">`. A folder holding only copied `.xsd` files is not a mod.
If unsure, call `sage_get_status`: if `projectDir` is not the project you are working on, or the state is
`no_index`/`error`, stop using these tools and read files directly.

## What the index knows
Every asset definition reachable from the mod's streams (the mod's own files and the SDK's vanilla XML they
include), the `$DEFINE`s, the include graph, and every typed reference (from the SDK's XSD schemas: which
attribute or element content names which asset type). Ids compare case-insensitively; type names exactly.

## Recipes
- Where is X defined? `sage_find_asset {id}`; add `type` when one id names several kinds of asset.
- Show me its XML: `sage_get_definition {type, id}` (the winning definition; `which` picks another).
- Who uses X? `sage_find_references {id, type}`.
- What weapons does a unit have? `sage_get_asset_references {"type": "GameObject", "id": "<unit>",
  "targetTypes": ["WeaponTemplate"], "depth": 3}` — the walk goes through every asset, only the edges
  returned are filtered, so a weapon fired by an object that the unit's death `ObjectCreationList` spawns
  (3 hops) is found; each edge's `path` lists the hops from the unit, `definedIn` names the `inheritFrom`
  parent that wrote it and `includedAt` the `xi:include` that pulled a shared fragment in. Follow
  `nextCursor` for more edges.
- What else does X use (projectiles, FX, audio…)? The same tool with other `targetTypes`, depth 1 first.
- What does X look like after inheritance and `xai:joinAction`? `sage_get_effective_asset {type, id}`:
  every element of the merged asset with the file and line it comes from.
- Where does X get its behaviour from? `sage_get_inheritance_chain {type, id}`.
- Does editing this file do anything? `sage_is_file_active {path}` (which streams include it, and how:
  `all` = compiled into the stream, `instance` = visible only, `reference` = another stream).
- Where does `DATA:foo/bar.xml` point? `sage_resolve_include {source, from}`.
- What is `$SOME_DEFINE`? `sage_find_define {name}`.
- Dead assets: `sage_unreferenced {type}` (without a type: only types something can reference).
- Problems: `sage_list_diagnostics {code, origin: "project"}` (the mod's own; the SDK's vanilla XML has
  thousands).

## Rules
- Prefer these tools over full-text search; never read the whole index or snapshot into context.
- Every answer has an `index` block: `stale: true` means files changed and the re-index is not done;
  `complete: false` means art files are still being scanned. `freshness`: `newest` (default) answers at
  once; `final` waits (up to 30 s) for the final index — use it right after you edit a file; `strict` also
  refuses with `INDEX_STALE` when the files still differ from the index. `sage_get_status` takes it too
  (`final`: report once the index is final).
- A file that no stream includes is indexed with `origin: inactive`: `sage_find_asset` shows it with a
  warning (edits to it have no effect in game); it never counts as a live definition or reference.
- `sage_get_asset_references` and `sage_get_definition` show values as written; only
  `sage_get_effective_asset` applies `xai:joinAction` Replace/Remove merges.
- Lists are paginated: follow `nextCursor`.
"""
