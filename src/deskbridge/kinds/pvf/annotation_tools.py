"""The annotation tools: `pvf_annotation_search`, `pvf_annotation_detail`, `pvf_explain_file` (read-only).

Rules and the engine live in `kinds/pvf/annotations/` (docs/pvf-annotations.md); this module reaches the open
archive for them — registries, target names, string links, existence — under the engine lock, like reads.
Shapes are small and paginated; every answer carries a `hint` naming the next call (docs/tools.md).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import read_regular_file
from deskbridge.core.guarded_save import save_if_unchanged
from deskbridge.core.paging import decode_cursor, encode_cursor
from deskbridge.core.tools import CallContext, ToolSpec
from deskbridge.core.workspace import DELETED, Workspace
from deskbridge.kinds.pvf.annotations.engine import (
    Annotator,
    Section,
    file_matches,
    first_value,
    parse,
    str_entries,
)
from deskbridge.kinds.pvf.annotations.rules import (
    RULE_FILE_MAX_BYTES,
    RuleSet,
    RuleStore,
    localize,
    parse_document,
)
from deskbridge.kinds.pvf.archive.base import norm_path
from deskbridge.kinds.pvf.args import PvfArgs, cursor, limit, request_id, revision, workspace_id
from deskbridge.kinds.pvf.service import PvfService, _link_text, _registry
from deskbridge.kinds.pvf.store import text_of

Lang = Literal["zh-CN", "en"]
LangField = Field("zh-CN", description="Language of titles and labels.")
EXPLAIN_PAGE_DEFAULT = 40
EXPLAIN_PAGE_MAX = 200
EXPLAIN_TOKEN_BUDGET = 500
"""Annotated tokens per page of pvf_explain_file (a section is never split; the page ends after it)."""
VALUES_SHOWN = 24
NAME_LOOKUPS_MAX = 200
EXAMPLE_SCAN_MAX = 300


class SearchArgs(PvfArgs):
    query: str = Field("", max_length=200, description="Words of a rule; '' lists all.")
    extension: str | None = Field(None, description="e.g. .equ.")
    lang: Lang = LangField
    cursor: str | None = cursor()
    limit: int = limit(20, 100)


class DetailArgs(PvfArgs):
    ruleId: str = Field(min_length=1, max_length=80, description="From pvf_annotation_search.")
    workspaceId: str | None = Field(None, description="Take examples from this archive.")
    examples: int = Field(3, ge=0, le=10, description="Example files to show.")
    lang: Lang = LangField


class ExplainArgs(PvfArgs):
    workspaceId: str = workspace_id()
    path: str = Field(description="Archive path, e.g. equipment/weapon/sword.equ.")
    expectedRevision: int | None = revision()
    sections: list[str] | None = Field(None, max_length=50, description="Only these, e.g. rarity.")
    lang: Lang = LangField
    draftRules: str | None = Field(
        None, max_length=RULE_FILE_MAX_BYTES, description="A rule file (JSON) to try, not saved."
    )
    cursor: str | None = cursor()
    limit: int = Field(EXPLAIN_PAGE_DEFAULT, ge=1, le=EXPLAIN_PAGE_MAX, description="Sections per page.")


class RulesGetArgs(PvfArgs):
    fileName: str | None = Field(None, description="e.g. 10-mine.json; omit to list.")


class RulesSaveArgs(PvfArgs):
    fileName: str = Field(description="e.g. 10-mine.json.")
    text: str = Field(max_length=RULE_FILE_MAX_BYTES, description="The whole rule file (JSON).")
    expectedSha256: str | None = Field(None, description="sha256 you read ('' = new file).")
    requestId: str | None = request_id()


RULE_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\.json$")


def _is_script(ar: Any, path: str) -> bool:
    """A token script (sections to explain), not a plain text file such as a Squirrel `.nut`."""
    if ar.family == "classic":
        from deskbridge.kinds.pvf.script.classic_codec import is_script

        return is_script(ar.read(path))
    from deskbridge.kinds.pvf.archive.nkpi import DATA_SCRIPT

    return bool(ar.data_type(path) == DATA_SCRIPT)


LIST_PREFIX_TOKENS = 4 * EXPLAIN_TOKEN_BUDGET
"""A `.lst` with more tokens is explained from its first ones (`_large_list`); a smaller one is read whole."""


def _large_list(ar: Any, path: str, ann: Annotator, tags: Any) -> Section | None:
    """The root of a large `.lst` holding only its first values, reading more as pages need them
    (`Section.more`), so a page never decompiles the records after it; the spans, values and counts are
    those of the whole text (`list_prefix_text` gives its first lines). None: read the file whole."""
    if not norm_path(path).endswith(".lst"):
        return None
    data = ar.read(path)
    root = Section(None, "", 1, True, None)

    def load(count: int) -> int | None:
        try:
            got = ar.list_prefix_text(path, data, count)
        except BridgeError:  # a prefix over its own text budget: the whole text decides
            return None
        if got is None:
            return None
        text, total = got
        root.items = parse(text, tags)[0].items
        ann.set_text(text)
        return total

    total = load(LIST_PREFIX_TOKENS)
    if total is None or total <= LIST_PREFIX_TOKENS:
        return None

    def more(count: int) -> list[tuple[Any, int]]:
        if load(max(count, 2 * len(root.items))) is None:
            raise BridgeError(ErrorCode.PVF_CORRUPT, f"'{path}' cannot be read in pages", data={"path": path})
        return root.values()

    root.value_count = total
    root.more = more
    return root


class _Resolver:
    """The engine's view of the open workspace (call under the engine lock); caches per call."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.ar = ws.source.archive  # type: ignore[union-attr]
        self._regs: dict[str, Any] = {}
        self._bases: dict[str, str | None] = {}
        self._links: dict[tuple[int, str], str | None] = {}
        self.lookups = 0

    def exists(self, path: str) -> bool:
        key = self.ws.key_of(path)
        if key in self.ws.overlay:
            return self.ws.overlay[key] is not DELETED
        return bool(self.ar.exists(path))

    def registry(self, list_path: str) -> Any:
        k = norm_path(list_path)
        if k not in self._regs:
            try:
                self._regs[k] = _registry(self.ar, list_path)
            except BridgeError:
                self._regs[k] = None
        return self._regs[k]

    def list_base(self, list_path: str) -> str | None:
        """The folder a `.lst`'s paths are relative to, without reading all of it."""
        k = norm_path(list_path)
        if k not in self._bases:
            if self.ar.family == "classic":
                self._bases[k] = posixpath.dirname(k)
            else:
                from deskbridge.kinds.pvf.archive.nkpi_lists import list_base

                try:
                    self._bases[k] = list_base(self.ar, list_path)
                except BridgeError:
                    self._bases[k] = None
        return self._bases[k]

    def name_of(self, path: str, name_section: str) -> str | None:
        if self.lookups >= NAME_LOOKUPS_MAX:
            return None
        self.lookups += 1
        try:
            text = text_of(self.ws, path, self.ws.read(path))
        except BridgeError:
            return None
        return None if text is None else first_value(text, name_section, self)

    def link_text(self, table: int, key: str) -> str | None:
        k = (table, key)
        if k not in self._links:
            try:
                self._links[k] = _link_text(self.ar, table, key)
            except BridgeError:
                self._links[k] = None
        return self._links[k]

    def str_tables(self, path: str) -> list[int]:
        """The n_string.lst table ids whose .str is `path` (classic and nkpi)."""
        want = norm_path(path)
        pairs: list[tuple[int, str]] = []
        try:
            if self.ar.family == "classic":
                pairs = list(self.ar.strings.nstring())
            else:
                pairs = [(t, rel) for lst in getattr(self.ar.refs(), "_lists", []) for t, rel in lst.items()]
        except BridgeError:
            return []
        return sorted({t for t, rel in pairs if norm_path(rel) == want})


def _rule_summary(rs: RuleSet, rule: dict[str, Any], lang: str, hits: list[str]) -> dict[str, Any]:
    ann = rule["annotation"]
    t = rule["target"]
    out: dict[str, Any] = {
        "ruleId": rule["id"],
        "title": localize(ann["title"], lang),
        "type": ann["type"],
        "target": t["kind"],
        "section": t.get("section"),
        "extensions": rule["match"].get("extensions", []),
        "origin": rule["origin"],
    }
    if hits:
        out["matchedIn"] = hits
    values = ann.get("values")
    if values:
        items = list(values.items())
        out["values"] = {k: localize(v, lang) for k, v in items[:20]}
        if len(items) > 20:
            out["valueCount"] = len(items)
    if ann.get("relation"):
        rel = rs.relations.get(ann["relation"], {})
        out["relation"] = {"name": ann["relation"], "title": localize(rel.get("title"), lang)}
    return out


def _section_filter(names: list[str] | None) -> set[str] | None:
    if not names:
        return None
    out = set()
    for n in names:
        n = n.strip()
        if n.startswith("[") and n.endswith("]"):
            n = n[1:-1]
        out.add(n.casefold())
    return out


class AnnotationService:
    """The three tools' logic over a `PvfService` and a `RuleStore`."""

    def __init__(self, svc: PvfService, store: RuleStore) -> None:
        self.svc = svc
        self.store = store

    # ------------------------------------------------------------------------------------------ search

    def search(
        self, query: str, extension: str | None, lang: str, cursor: str | None, limit: int
    ) -> dict[str, Any]:
        rs = self.store.current()
        found = rs.search(query, extension)
        start = 0
        if cursor:
            data = decode_cursor(
                cursor, tool="pvf_annotation_search", expect={"q": query, "x": extension}, ints=("o",)
            )
            start = data["o"]
        page = found[start : start + limit]
        end = start + len(page)
        more = end < len(found)
        return {
            "rules": [_rule_summary(rs, r, lang, h) for r, h in page],
            "total": len(found),
            "nextCursor": encode_cursor({"q": query, "x": extension, "o": end}) if more else None,
            "userFiles": rs.files,
            "refusedFiles": rs.errors,
            "hint": ("More rules: call pvf_annotation_search again with nextCursor. " if more else "")
            + "pvf_annotation_detail(ruleId) shows a whole rule with examples; pvf_explain_file explains a file.",
        }

    # ------------------------------------------------------------------------------------------ detail

    def detail(self, rule_id: str, workspace_id: str | None, examples: int, lang: str) -> dict[str, Any]:
        rs = self.store.current()
        rule = rs.rule(rule_id)
        raw = {k: v for k, v in rule.items() if k != "origin"}
        out: dict[str, Any] = {
            "ruleId": rule_id,
            "title": localize(rule["annotation"]["title"], lang),
            "origin": rule["origin"],
            "priority": rs.rules.index(rule),
            "rule": raw,
        }
        rel_name = rule["annotation"].get("relation")
        if rel_name:
            out["relation"] = self._relation(rs, rel_name)
        if workspace_id is None or examples == 0:
            out["examples"] = []
            out["hint"] = "Pass workspaceId to see files of the open archive where this rule applies."
            return out
        out["examples"], out["scanned"] = self._examples(rs, rule, workspace_id, examples, lang)
        out["hint"] = (
            "pvf_explain_file(workspaceId, path) explains a whole example file."
            if out["examples"]
            else "No file of the open archive shows this rule (scanned the first matching files); "
            "pvf_search finds files by path or content."
        )
        return out

    def _relation(self, rs: RuleSet, name: str, depth: int = 0) -> dict[str, Any]:
        rel = rs.relations.get(name)
        if rel is None:
            return {"name": name, "missing": True}
        out = {"name": name, **{k: v for k, v in rel.items()}}
        if rel.get("kind") == "union" and depth < 3:
            out["members"] = [self._relation(rs, m, depth + 1) for m in rel["relations"]]
        return out

    def _examples(
        self, rs: RuleSet, rule: dict[str, Any], workspace_id: str, want: int, lang: str
    ) -> tuple[list[dict[str, Any]], int]:
        svc = self.svc
        found: list[dict[str, Any]] = []
        scanned = 0
        with svc.engine.lock:
            ws = svc._ws(workspace_id)
            ar = ws.source.archive  # type: ignore[union-attr]
            res = _Resolver(ws)
            for path in ws.all_keys():
                if len(found) >= want or scanned >= EXAMPLE_SCAN_MAX:
                    break
                if not file_matches(rule, path, ar.family, ar.variant):
                    continue
                scanned += 1
                if rule["target"]["kind"] == "path":
                    found.append({"path": path, "fileAnnotation": {"ruleId": rule["id"]}})
                    continue
                try:
                    text = text_of(ws, path, ws.read(path))
                    if text is None:
                        continue
                    ann = Annotator(rs, res, path, family=ar.family, variant=ar.variant, lang=lang)
                    root, order = parse(text, ann.tag_reading())
                except BridgeError:
                    continue
                want_sec = rule["target"].get("section")
                targets = (
                    [root]
                    if want_sec is None
                    else [s for s in order if (s.name or "").casefold() == want_sec.casefold()]
                )
                for sec in targets:
                    entry = ann.section(sec, max_values=8, token_limit=64)
                    toks = [
                        t
                        for t in entry["tokens"]
                        if rule["id"] == t["ruleId"] or rule["id"] in t.get("alsoMatched", [])
                    ]
                    if toks or entry.get("annotation", {}).get("ruleId") == rule["id"]:
                        found.append(
                            {
                                "path": path,
                                "section": entry["path"] or None,
                                "line": entry["line"],
                                "values": entry["values"][:8],
                                "tokens": toks[:8],
                            }
                        )
                        break
        return found, scanned

    # ------------------------------------------------------------------------------------------ explain

    def explain(
        self,
        workspace_id: str,
        path: str,
        expected_revision: int | None,
        sections: list[str] | None,
        lang: str,
        cursor: str | None,
        limit: int,
        draft: str | None = None,
    ) -> dict[str, Any]:
        svc = self.svc
        rs = self.store.preview(draft) if draft is not None else self.store.current()
        filt = _section_filter(sections)
        fkey = sorted(filt) if filt else None
        with svc.engine.lock:
            ws = svc._ws(workspace_id, expected_revision)
            data = ws.read(path)
            revision = ws.revision
            ar = ws.source.archive  # type: ignore[union-attr]
            start = 0
            token_from = 0
            if cursor:
                c = decode_cursor(
                    cursor, tool="pvf_explain_file", expect={"p": norm_path(path), "f": fkey}, ints=("o", "t")
                )
                if c.get("r") != revision:
                    raise BridgeError(
                        ErrorCode.STALE_WORKSPACE,
                        "the workspace changed between pages",
                        "Explain the file again from the first page (omit cursor).",
                        data=svc.engine.identity_data(),
                    )
                start, token_from = c["o"], c["t"]
            res = _Resolver(ws)
            ann = Annotator(rs, res, path, family=ar.family, variant=ar.variant, lang=lang)
            tags = ann.tag_reading()
            lazy = _large_list(ar, path, ann, tags) if filt is None else None
            text = ann.text if lazy is not None else text_of(ws, path, data)
            ann.set_text(text)
            base: dict[str, Any] = {
                "path": path,
                "revision": revision,
                "lang": lang,
                "fileAnnotations": ann.file_annotations(),
            }
            if text is None:
                return {
                    **base,
                    "kind": "binary",
                    "sections": [],
                    "hint": "A binary file has only path annotations; pvf_read_file shows its bytes.",
                }
            if posixpath.splitext(norm_path(path))[1] == ".str":
                return self._explain_str(base, res, path, text, revision, start, limit)
            if lazy is None and not _is_script(ar, path):
                return {
                    **base,
                    "kind": "text",
                    "sections": [],
                    "hint": "A plain text file (not a token script) has only path annotations; pvf_read_file "
                    "shows its text.",
                }
            root, order = (lazy, []) if lazy is not None else parse(text, tags)
            chosen = [s for s in order if filt is None or (s.name or "").casefold() in filt]
            if root.values() and (filt is None):
                chosen.insert(0, root)
            page: list[dict[str, Any]] = []
            budget = EXPLAIN_TOKEN_BUDGET
            i = start
            t0 = token_from
            next_t = 0
            while i < len(chosen) and len(page) < limit and budget > 0:
                entry = ann.section(chosen[i], max_values=VALUES_SHOWN, token_start=t0, token_limit=budget)
                budget -= max(1, len(entry["tokens"]))
                page.append(entry)
                if entry.get("tokensTruncated"):
                    next_t = t0 + len(entry["tokens"])
                    break
                i += 1
                t0 = 0
            unknown = sorted({s.name for s in order if s.name is not None and not ann.rules_for(s)})
        out: dict[str, Any] = {
            **base,
            "kind": "script",
            "sections": page,
            "totalSections": len(chosen),
            "unknownSections": unknown[:100],
            "nextCursor": encode_cursor({"p": norm_path(path), "f": fkey, "r": revision, "o": i, "t": next_t})
            if i < len(chosen)
            else None,
        }
        if filt:
            present = {(s.name or "").casefold() for s in order}
            missing = sorted(n for n in filt if n not in present)
            if missing:
                out["missingSections"] = missing
        out["hint"] = (
            "More sections: call pvf_explain_file again with nextCursor. " if out["nextCursor"] else ""
        ) + (
            "A reference's path can be explained in turn with pvf_explain_file; pvf_annotation_detail(ruleId) "
            "shows a rule; pvf_read_file shows the raw text."
        )
        return out

    # ------------------------------------------------------------------------------------------ user rule files

    def _user_path(self, name: str) -> Path:
        if self.store.user_dir is None:
            raise BridgeError(ErrorCode.NOT_FOUND, "this server has no user rule folder")
        if not RULE_FILE_NAME.match(name):
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"{name!r} is not a rule file name",
                "Use letters, digits, '.', '_' or '-' and end with .json (e.g. 10-mine.json); no folders.",
            )
        return self.store.user_dir / name

    def rules_get(self, name: str | None) -> dict[str, Any]:
        rs = self.store.current()
        folder = self.store.user_dir
        if name is None:
            names = (
                sorted(p.name for p in folder.glob("*.json"))
                if folder is not None and folder.is_dir()
                else []
            )
            refused = {e["file"]: e for e in rs.errors}
            return {
                "folder": str(folder) if folder is not None else None,
                "files": [{"fileName": n, "loaded": n in rs.files, "refused": refused.get(n)} for n in names],
                "hint": "pvf_annotation_rules_get(fileName) reads one; pvf_annotation_rules_save writes one.",
            }
        path = self._user_path(name)
        if not path.exists():
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                f"no user rule file {name}",
                "pvf_annotation_rules_get without fileName lists them; pvf_annotation_rules_save creates one.",
            )
        raw = read_regular_file(path, max_bytes=RULE_FILE_MAX_BYTES, shown_as=name)
        refused = next((e for e in rs.errors if e["file"] == name), None)
        return {
            "fileName": name,
            "text": raw.decode("utf-8", errors="replace"),
            "sha256": hashlib.sha256(raw).hexdigest(),
            "loaded": name in rs.files,
            "refused": refused,
            "hint": "Preview changes with pvf_explain_file(draftRules=…), then pvf_annotation_rules_save.",
        }

    def rules_save(self, name: str, text: str, expected: str | None) -> dict[str, Any]:
        path = self._user_path(name)
        raw = text.encode("utf-8")
        current = self.store.current()
        known = set(current.relations)
        doc = parse_document(raw, name, known)
        saved = save_if_unchanged(
            path,
            raw,
            expected,
            max_bytes=RULE_FILE_MAX_BYTES,
            shown_as=name,
            changed=f"{name} changed since you read it",
            hint="Read it again with pvf_annotation_rules_get and merge your change.",
            backup=True,
        )
        rs = self.store.current()
        return {
            "fileName": name,
            "sha256": saved.sha256,
            "rules": len(doc.get("rules", [])),
            "relations": len(doc.get("relations", {})),
            "loaded": name in rs.files,
            "priority": rs.files.index(name) if name in rs.files else None,
            "hint": "The rules apply at once: pvf_explain_file shows them; pvf_annotation_search lists them.",
        }

    def _explain_str(
        self,
        base: dict[str, Any],
        res: _Resolver,
        path: str,
        text: str,
        revision: int,
        start: int,
        limit: int,
    ) -> dict[str, Any]:
        entries = str_entries(text)
        tables = res.str_tables(path)
        page = entries[start : start + limit]
        end = start + len(page)
        return {
            **base,
            "kind": "str",
            "linkTables": tables,
            "entries": [
                {
                    "line": n,
                    "key": k,
                    "value": v,
                    "links": [f"<{t}::{k}>" for t in tables],
                }
                for n, k, v in page
            ],
            "totalEntries": len(entries),
            "nextCursor": encode_cursor({"p": norm_path(path), "f": None, "r": revision, "o": end, "t": 0})
            if end < len(entries)
            else None,
            "hint": "Scripts refer to an entry as <table::key> (linkTables from n_string.lst); "
            "pvf_resolve(text=…) finds the links whose text contains a word.",
        }


def annotation_tools(svc: PvfService, store: RuleStore | None = None) -> list[ToolSpec]:
    """The annotation tools over the PVF service; rules from the built-ins and the user config folder."""
    if store is None:
        from deskbridge.settings import deskbridge_dirs

        store = RuleStore(deskbridge_dirs().config)
    an = AnnotationService(svc, store)

    def search(call: CallContext, args: SearchArgs) -> dict[str, Any]:
        return an.search(args.query, args.extension, args.lang, args.cursor, args.limit)

    def detail(call: CallContext, args: DetailArgs) -> dict[str, Any]:
        return an.detail(args.ruleId, args.workspaceId, args.examples, args.lang)

    def explain(call: CallContext, args: ExplainArgs) -> dict[str, Any]:
        return an.explain(
            args.workspaceId,
            args.path,
            args.expectedRevision,
            args.sections,
            args.lang,
            args.cursor,
            args.limit,
            args.draftRules,
        )

    def rules_get(call: CallContext, args: RulesGetArgs) -> dict[str, Any]:
        return an.rules_get(args.fileName)

    def rules_save(call: CallContext, args: RulesSaveArgs) -> dict[str, Any]:
        return an.rules_save(args.fileName, args.text, args.expectedSha256)

    return [
        ToolSpec(
            "pvf_annotation_search",
            "Search annotation rules",
            "Rules for what DNF script sections and tokens mean.",
            SearchArgs,
            search,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_annotation_detail",
            "Annotation rule detail",
            "One rule, with example files.",
            DetailArgs,
            detail,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_explain_file",
            "Explain a file",
            "What each section and token of an archive file means, references resolved.",
            ExplainArgs,
            explain,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_annotation_rules_get",
            "Read user annotation rules",
            "The user rule files, or one with its sha256.",
            RulesGetArgs,
            rules_get,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_annotation_rules_save",
            "Save a user annotation rule file",
            "Validate and write a user rule file.",
            RulesSaveArgs,
            rules_save,
            idempotent=True,
        ),
    ]
