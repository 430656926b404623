"""The text of the deskbridge Agent Skill: `SKILL.md` and one reference per kind.

Kept generic on purpose (seed ra3-mod-xml §8): a skill is loaded in every conversation, so it says briefly
when the tools apply, gives positive signals and explicit negatives, a cheap probe first, the workflows and
the rules — and names no project's own documents (a test checks this).
"""

from __future__ import annotations

from typing import Final

SKILL_MD: Final = """\
---
name: deskbridge
description: Work on a person's DNF Script.pvf archive, Markdown notes or Red Alert 3 / C&C3 (SAGE) mod through
  the deskbridge MCP tools (pvf_*, md_*, sage_*) - read, search, preview every change, apply, save. Use when
  those tools are available and the task is about such a workspace; probe once, stop if it is not one.
---

# deskbridge

deskbridge serves the workspace the person has open (the same session they see in their browser) to you as
MCP tools. It guards every write: reads return a `revision`, writes pass it back, risky changes ask the person.

## When this applies

Use the tools whose prefix matches the workspace, and only after one cheap probe confirms it:

| kind | positive signals | probe |
|---|---|---|
| SAGE mod (`sage_*`) | `Data/Mod.xml`, `Data/additionalmaps/mapmetadata_*.xml`, a `*.babproj`; XML rooted at `<AssetDeclaration xmlns="uri:ea.com:eala:asset">` | `sage_get_status` |
| PVF archive (`pvf_*`) | a `Script.pvf` (DNF game data: `.skl`, `.equ`, `.lst`, `.str` files inside) | `pvf_workspace_info` |
| Markdown (`md_*`) | `.md` notes or docs the person has open in the deskbridge editor | `md_get_app_status` |

Not a match (do not use the tools, read files normally):
- a folder that only holds copied `.xsd` schemas, or the SDK itself - that is not a mod;
- `CnC3Types.xsd` names C&C3 (Command & Conquer 3), not Red Alert 3: do not assume RA3 from it;
- generic XML configs, build scripts, other games' data, a repository that merely mentions these formats.

Stop using a kind's tools when the probe fails, says `no_index`/`NO_WORKSPACE`, or its `projectDir`/path is not
the folder you are working in: the server is open on something else.

## Rules

- Read before you write; pass the `revision` you read as `expectedRevision`. On `STALE_WORKSPACE`, read again.
- Errors carry `code`, `message` and a `hint` naming the tool to call next: follow the hint, do not guess.
- Lists are paginated: follow `nextCursor`; filter (types, prefixes, paths) instead of paging everything.
- Prefer the index to grep: the tools know includes, inheritance and references that text search misses.
- Pass types when you know them (ids repeat across types).
- Never pull a whole snapshot, archive or document into context; ask for the part you need.
- Writes may wait for the person's approval; a decline means stop and ask, not retry.
- `source: snapshot` in an answer means no server is running: it may be old (`snapshotAgeSeconds`).

## Workflows

- SAGE: see `references/sage.md` (definitions, references, is a file active, inheritance, unreferenced,
  what a unit's weapons are).
- PVF: see `references/pvf.md` (search -> read -> plan -> preview -> apply -> save).
- Markdown: see `references/markdown.md` (read a section -> patch -> verify).
"""

SAGE_MD: Final = """\
# SAGE mods (Red Alert 3, C&C3, Kane's Wrath)

Probe: `sage_get_status`. Its `index.projectDir` must be the mod you work on and `state` one of `ready`,
`ready_xml` or `stale`; `building` means wait and probe again, anything else means stop.

## Find where an asset is defined
`sage_find_asset {id}` (ids are case-insensitive); add `type` when one id names several kinds of asset.
Then `sage_get_definition {type, id}` for the winning definition's XML and its line range.

## Who uses an asset
`sage_find_references {id, type}`: file, line, element and attribute of each use, and the asset holding it.

## Is this file active?
`sage_is_file_active {path}`: which streams include it and how (`all` compiled, `instance` visible only,
`reference`). An inactive file has no effect in game - editing it changes nothing.

## Inheritance
`sage_get_inheritance_chain {type, id}`: the `inheritFrom` chain with each link's file and line. Values set by
a parent apply unless the child overrides them.

## Unreferenced assets
`sage_unreferenced {type}` lists project assets nothing references (pass a type; without one only referenceable
types are listed).

## The weapons (or FX, projectiles...) of a unit
`sage_get_asset_references {type: "GameObject", id, targetTypes: ["WeaponTemplate"]}`: edges with provenance
(which element and attribute, which file and line, `definedIn` when inherited). Start at depth 1 with a
`targetTypes` filter; follow one edge deeper only when you need to. Values are shown as written:
`xai:joinAction` merges are not applied.

## Includes and defines
`sage_resolve_include {source, from}` for where `DATA:...` points; `sage_find_define {name}` for a `$DEFINE`.
"""

PVF_MD: Final = """\
# PVF archives (DNF Script.pvf)

Probe: `pvf_workspace_info` - the archive, its family, file count and `revision`.

## Change something: search -> read -> plan -> preview -> apply -> save
1. `pvf_search {query}` to find the files (paths look like `skill/swordman/...skl`); `pvf_list_dir` to browse.
2. `pvf_read_file {path}` - the script text and the `revision` it was read at.
3. Plan the change: `pvf_edit_prepare` with the edits and `expectedRevision`. Nothing changes yet.
4. `pvf_plan_preview` - page through the diff and any warnings; show the person what will change.
5. `pvf_plan_apply` with the change keys you want (and acknowledged warning ids). Unselected changes are dropped.
6. `pvf_archive_save` writes the archive (atomically); `pvf_archive_save_as` writes a copy.

Long operations return a task: poll `pvf_task_status`. String-table (`.str`) and list (`.lst`) changes travel
with the files that need them; a preview warning names a missing dependency - select it, do not ignore it.
"""

MARKDOWN_MD: Final = """\
# Markdown documents

Probe: `md_get_app_status` - the workspace, the current file and whether it is dirty.

## Read a section -> patch -> verify
1. `md_get_document_outline` for the heading paths (`"Intro > Setup"`).
2. `md_read_section {path}` - only that section, with its line range and the `revision`.
3. Change it: `md_patch_section` (replace / append / prepend under a heading) or `md_replace_text` (exact
   `oldText`, with `expectedOccurrences`). Pass `expectedRevision`. Whole-document replacement is a last resort.
4. Verify with `md_read_section` again; `md_save_current_document` when the person wants it on disk.

The person may be typing in the same document: small, local edits keep their work; a `STALE_WORKSPACE` or
`EXPECTED_TEXT_MISMATCH` means read again and redo the edit on the fresh text.
Find things across the notes with `md_search`; list and open documents with `md_list_open_documents` and
`md_open_document`.
"""

REFERENCES: Final = {"sage.md": SAGE_MD, "pvf.md": PVF_MD, "markdown.md": MARKDOWN_MD}
