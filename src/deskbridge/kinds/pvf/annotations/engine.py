"""The annotation engine: a script's section tree, which rules hit which section and token, and the answer.

Sections (docs/pvf-annotations.md "How a file is read"): a tag `[x]` with a matching `[/x]` later is a
container whose content nests; any other tag takes the values up to the next tag. Inside a container an
empty non-container tag (`[usable job]` `[swordman]` `[mage]` `[/usable job]`) also counts as a value of the
container, so job lists read the same whether the jobs are strings or tags. Tokens before the first tag
(`.lst` records) belong to the file itself (section `None`). nkpi archives store tag-like values as tags
(`[equipment type]` `[coat]`, `[skill levelup]` `[fighter]` `5` `1`; classic ones as strings), which the text
cannot tell from sections: with a `TagReading` of the rules, a section the rules read values of takes such a
tag as a value (see `TagReading.takes`). A token target indexes a section's direct
values (after `offset`), in records of `recordTokens` when given; duplicate sections are all annotated
(pvfine docs/标注功能设计.md: "section 名称重复时，规则匹配全部同名 section").

The engine is pure: the archive is reached only through a `Resolver` (registries, names, string links,
existence), which the tool layer implements over the open workspace.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from deskbridge.kinds.pvf.script import text as dialect
from deskbridge.kinds.pvf.script.text import Kind, Token

from .rules import RuleSet, localize

LINK_RE = re.compile(r"^<\s*(\d+)\s*::\s*([^<>`]+?)\s*(?:`[^`]*`)?\s*>$")
VARIANT_LABELS = {"legacy": "90US", "guard": "90US", "protected": "90CN", "paged": "110US"}
"""nkpi key schemes → the client families they were seen in (research: pvfine docs/PVF新格式分析.md §2.2)."""


class Resolver(Protocol):
    def exists(self, path: str) -> bool: ...
    def registry(self, list_path: str) -> Any: ...
    def list_base(self, list_path: str) -> str | None: ...
    def name_of(self, path: str, name_section: str) -> str | None: ...
    def link_text(self, table: int, key: str) -> str | None: ...


@dataclass
class Section:
    name: str | None
    tag: str
    line: int
    container: bool
    parent: Section | None
    items: list[Any] = field(default_factory=list)
    """Tokens (as (Token, file index)) and child Sections, in file order."""
    occurrence: int = 1
    pos: int = -1
    """Offset of the tag in the text (-1 for the root)."""
    value_count: int | None = None
    """When `items` holds only the first values (a page of a large `.lst`): how many the file has."""
    more: Callable[[int], list[tuple[Token, int]]] | None = None
    """With `value_count`: reads at least that many first values into `items` and returns `values()`."""

    @property
    def path(self) -> str:
        names = []
        s: Section | None = self
        while s is not None and s.name is not None:
            names.append(s.name)
            s = s.parent
        return "/".join(reversed(names))

    def children(self) -> list[Section]:
        return [i for i in self.items if isinstance(i, Section)]

    def values(self) -> list[tuple[Token, int]]:
        out: list[tuple[Token, int]] = []
        for item in self.items:
            if isinstance(item, Section):
                if self.container and not item.container and not item.items:
                    out.append((Token(Kind.SECTION, item.tag, pos=item.pos), -1))
            else:
                out.append(item)
        return out


@dataclass(frozen=True)
class TagReading:
    """Which tags the rules read as values of which sections (`Annotator.tag_reading`)."""

    keys: dict[str, frozenset[str]]
    """Section name (casefolded) → the tags its enum / contextual rules know (`[coat]`, `[fighter]`)."""
    targeted: frozenset[str]
    """Sections some token rule reads values of."""
    known: frozenset[str]
    """Sections some rule names: such a tag is a section, unless the section's own keys list it."""

    def takes(self, section: Section, tag: str) -> bool:
        """True when `tag` (not a container, not an end tag) right after `section`'s content is a value of
        it: a tag its rules list, as often as it comes (records of a job tag and numbers); else one tag as
        the first value of a section a token rule reads and that has none yet (`[stackable type]`
        `[material]` `0`), unless a rule knows a section of that name (an empty `[explain]` followed by
        `[flavor text]` stays two sections)."""
        name = section.name
        if name is None or name.casefold() not in self.targeted:
            return False
        folded = tag.casefold()
        if folded in self.keys.get(name.casefold(), ()):
            return True
        if folded[1:-1] in self.known:
            return False
        return not any(not isinstance(item, Section) for item in section.items)


def parse(text: str, tags: TagReading | None = None) -> tuple[Section, list[Section]]:
    """The file's root pseudo-section and every section in document order (SCRIPT_SYNTAX on bad text);
    with `tags`, tags the rules read as values are values (module docstring)."""
    tokens = dialect.lex(text)
    containers = dialect.container_indexes(tokens)
    root = Section(None, "", 1, True, None)
    order: list[Section] = []
    stack = [root]
    current = root
    counts: dict[tuple[int, str], int] = {}
    for i, tok in enumerate(tokens):
        if tok.kind is Kind.SECTION:
            tag = str(tok.value)
            if i in containers and tok.is_end_tag:
                name = tag[2:-1]
                while len(stack) > 1:
                    top = stack.pop()
                    if top.name == name:
                        break
                current = stack[-1]
                continue
            if tags is not None and i not in containers and not tok.is_end_tag and tags.takes(current, tag):
                current.items.append((tok, i))
                continue
            parent = stack[-1]
            name = tag[1:-1]
            sec = Section(name, tag, dialect.line_col(text, tok.pos)[0], i in containers, parent, pos=tok.pos)
            key = (id(parent), name.casefold())
            counts[key] = counts.get(key, 0) + 1
            sec.occurrence = counts[key]
            parent.items.append(sec)
            order.append(sec)
            if sec.container:
                stack.append(sec)
            current = sec
        else:
            current.items.append((tok, i))
    return root, order


# --------------------------------------------------------------------------------------------- values


def display(tok: Token) -> str:
    """A token's value as shown to an agent (strings without quotes, links as <id::key>)."""
    if tok.kind is Kind.INT:
        return str(tok.value)
    if tok.kind is Kind.FLOAT:
        return dialect.format_float32(int(tok.value)) or dialect.token_text(tok)
    if tok.kind is Kind.LINK:
        return f"<{tok.link_id}::{tok.value}>"
    return str(tok.value)


VALUE_MAX_CHARS = 1000
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def clip(text: str) -> str:
    """A value as shown: long texts (explains) cut to VALUE_MAX_CHARS with an ellipsis; pvf_read_file has all."""
    return text if len(text) <= VALUE_MAX_CHARS else text[:VALUE_MAX_CHARS] + "…"


def link_of(tok: Token) -> tuple[int, str] | None:
    if tok.kind is Kind.LINK:
        return tok.link_id, str(tok.value)
    if tok.kind is Kind.TYPED and isinstance(tok.value, str):
        m = LINK_RE.match(tok.value.strip())
        if m:
            return int(m.group(1)), m.group(2)
    return None


def int_of(tok: Token) -> int | None:
    if tok.kind is Kind.INT or (tok.kind is Kind.TYPED and isinstance(tok.value, int)):
        return int(tok.value)
    return None


# --------------------------------------------------------------------------------------------- matching


def _glob_re(glob: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z", re.I)


_GLOBS: dict[str, re.Pattern[str]] = {}


def file_matches(rule: dict[str, Any], path: str, family: str | None, variant: str | None) -> bool:
    """Extension, glob (`*` and `?` stay inside a folder, `**` crosses them), family and variant."""
    m = rule["match"]
    p = path.replace("\\", "/").lower()
    exts = m.get("extensions")
    if exts and not any(p.endswith(e.lower()) for e in exts):
        return False
    glob = m.get("glob")
    if glob:
        rx = _GLOBS.get(glob) or _GLOBS.setdefault(glob, _glob_re(glob.lower()))
        if rx.match(p) is None:
            return False
    fams = m.get("families")
    if fams and family not in fams:
        return False
    variants = m.get("variants")
    if variants:
        names = {variant, VARIANT_LABELS.get(variant or "")}
        if not names & set(variants):
            return False
    return True


def _selections(target: dict[str, Any], n: int) -> list[tuple[range, int]]:
    """The value positions a token target selects among n values, as ranges, each with the distance `k` from
    a position back to its record's start (a position's record starts at `pos - k` when the target reads
    records): a `.lst` of 20k records is selected without a loop over its values."""
    off = target.get("offset", 0)
    size = target.get("recordTokens")
    idx = target.get("index")
    rng = target.get("range")

    def inner(width: int) -> range:
        if idx is not None:
            return range(idx, idx + 1) if idx < width else range(0)
        if rng is not None:
            return range(rng["start"], min(rng["endExclusive"], width))
        return range(max(0, width))

    if size:
        records = len(range(off, n - size + 1, size))
        return [(range(off + k, off + k + size * records, size), k) for k in inner(size)]
    ks = inner(n - off)
    return [(range(off + ks.start, off + ks.stop), 0)] if len(ks) else []


# --------------------------------------------------------------------------------------------- annotate


class Annotator:
    """Applies a rule set to one file; resolves references, paths, images and string links."""

    def __init__(
        self,
        rules: RuleSet,
        resolver: Resolver,
        path: str,
        *,
        family: str | None,
        variant: str | None,
        lang: str,
        text: str | None = None,
    ) -> None:
        self.text = text
        self._astral: list[int] | None = None
        self._newlines: list[int] = []
        self.rs = rules
        self.res = resolver
        self.path = path
        self.lang = lang
        self.applicable = [r for r in rules.rules if file_matches(r, path, family, variant)]
        self._names: dict[tuple[str, str], str | None] = {}

    def set_text(self, text: str | None) -> None:
        """The text spans are measured in (a longer prefix of a large `.lst` as its pages are read)."""
        self.text = text
        self._astral = None

    def tag_reading(self) -> TagReading:
        """The applicable rules' view of tag values, for `parse`."""
        keys: dict[str, set[str]] = {}
        targeted: set[str] = set()
        known: set[str] = set()
        for r in self.applicable:
            t = r["target"]
            sec = t.get("section")
            if sec is None or t["kind"] == "path":
                continue
            name = sec.casefold()
            known.add(name)
            if t["kind"] != "token":
                continue
            targeted.add(name)
            ann = r["annotation"]
            listed: list[str] = list(ann.get("values") or {})
            rel = self.rs.relations.get(ann.get("relation") or "", {})
            if rel.get("kind") == "contextual":
                listed += list(rel["contextPaths"])
            keys.setdefault(name, set()).update(k.casefold() for k in listed if dialect.is_section_text(k))
        return TagReading({k: frozenset(v) for k, v in keys.items()}, frozenset(targeted), frozenset(known))

    def file_annotations(self) -> list[dict[str, Any]]:
        return [self._head(r) for r in self.applicable if r["target"]["kind"] == "path"]

    def _head(self, rule: dict[str, Any]) -> dict[str, Any]:
        ann = rule["annotation"]
        out = {"ruleId": rule["id"], "title": localize(ann["title"], self.lang), "type": ann["type"]}
        if ann.get("content") is not None:
            out["content"] = localize(ann["content"], self.lang)
        if ann.get("unit"):
            out["unit"] = ann["unit"]
        return out

    def span(self, pos: int) -> dict[str, int]:
        """Line, and offset/length in UTF-16 code units (what a browser's string indexes count), of the
        token at `pos` in the text; {} without the text."""
        text = self.text
        if text is None or pos < 0:
            return {}
        m = dialect.TOKEN_RE.match(text, pos)
        end = m.end() if m is not None else pos + 1
        if self._astral is None:
            # One pass for the whole file: a .lst page asks for hundreds of spans.
            self._astral = [m.start() for m in _ASTRAL.finditer(text)]
            self._newlines = [m.start() for m in re.finditer("\n", text)]
        a = self._astral
        start16 = pos + bisect.bisect_left(a, pos)
        end16 = end + bisect.bisect_left(a, end)
        line = bisect.bisect_left(self._newlines, pos) + 1
        return {"line": line, "offset": start16, "length": end16 - start16}

    def rules_for(self, section: Section) -> list[dict[str, Any]]:
        name = None if section.name is None else section.name.casefold()
        out = []
        for r in self.applicable:
            t = r["target"]
            if t["kind"] == "path":
                continue
            want = t.get("section")
            if (want is None and name is None) or (
                want is not None and name is not None and want.casefold() == name
            ):
                out.append(r)
        return out

    def section(
        self,
        section: Section,
        *,
        max_values: int,
        token_start: int = 0,
        token_limit: int = 1 << 30,
    ) -> dict[str, Any]:
        """One section's entry: values, the section annotation, and the annotated tokens from the
        `token_start`-th on (at most `token_limit`; `tokensTruncated` when more follow)."""
        vals = section.values()
        n = section.value_count if section.value_count is not None else len(vals)
        rules = self.rules_for(section)
        entry: dict[str, Any] = {
            "name": section.name,
            "path": section.path,
            "occurrence": section.occurrence,
            "line": section.line,
            "known": bool(rules),
        }
        if section.container:
            entry["container"] = True
        token_rules = [(r, _selections(r["target"], n)) for r in rules if r["target"]["kind"] == "token"]
        selected: set[int] = set()
        for _, sels in token_rules:
            for positions, _k in sels:
                selected.update(positions)
        keys = sorted(selected)
        window = keys[token_start : token_start + token_limit]
        if section.more is not None:
            # a record's context / image token may follow the selected one: read to the end of its record
            reach = max(
                (
                    max(r["target"].get(f) or 0 for f in ("recordTokens", "contextIndex", "imagePathToken"))
                    for r, _ in token_rules
                ),
                default=0,
            )
            need = min(n, max(min(max_values, n), window[-1] + 1 + reach if window else 0))
            if need > len(vals):
                vals = section.more(need)
        tag_span = self.span(section.pos)
        if tag_span:
            entry["offset"], entry["length"] = tag_span["offset"], tag_span["length"]
        shown = [clip(self._value_text(t)) for t, _ in vals[:max_values]]
        entry["values"] = shown
        if n > max_values:
            entry["valueCount"] = n
            entry["valuesTruncated"] = True
        sec_rules = [r for r in rules if r["target"]["kind"] == "section"]
        if sec_rules:
            entry["annotation"] = self._head(sec_rules[0])
            if len(sec_rules) > 1:
                entry["annotation"]["alsoMatched"] = [r["id"] for r in sec_rules[1:]]
        tokens = []
        for pos in window:
            hit = [
                (rule, pos - k if rule["target"].get("recordTokens") else None)
                for rule, sels in token_rules
                for positions, k in sels
                if pos in positions
            ]
            (rule, rec), *others = hit
            tok = vals[pos][0]
            item = {"index": pos, "value": clip(display(tok)), **self.span(tok.pos), **self._head(rule)}
            if rec is not None:
                item["record"] = (pos - rule["target"].get("offset", 0)) // rule["target"]["recordTokens"]
            self._explain(rule, tok, vals, rec, item)
            if others:
                item["alsoMatched"] = [r["id"] for r, _ in others]
            tokens.append(item)
        entry["tokens"] = tokens
        if token_start or len(keys) > len(window):
            entry["tokenCount"] = len(keys)
            entry["tokensFrom"] = token_start
            if token_start + len(window) < len(keys):
                entry["tokensTruncated"] = True
        return entry

    def _value_text(self, tok: Token) -> str:
        link = link_of(tok)
        if link is not None:
            text = self.res.link_text(*link)
            return f"<{link[0]}::{link[1]}> {text}" if text is not None else display(tok)
        return display(tok)

    def _explain(
        self,
        rule: dict[str, Any],
        tok: Token,
        vals: list[tuple[Token, int]],
        rec: int | None,
        item: dict[str, Any],
    ) -> None:
        ann = rule["annotation"]
        kind = ann["type"]
        link = link_of(tok)
        if link is not None:
            item["text"] = self.res.link_text(*link)
        if kind == "enum":
            key = display(tok)
            label = (ann.get("values") or {}).get(key)
            item["label"] = localize(label, self.lang)
            if label is None:
                item["unknownValue"] = True
        elif kind == "reference":
            ctx = None
            rel = self.rs.relations.get(ann["relation"], {})
            ci = rule["target"].get("contextIndex", rel.get("contextToken"))
            if ci is not None and rec is not None and rec + ci < len(vals):
                ctx = display(vals[rec + ci][0])
            item["reference"] = self.reference(ann["relation"], int_of(tok), ctx)
        elif kind == "path":
            item["target"] = self._path(ann.get("pathRoot", ""), display(tok))
        elif kind == "image":
            pi = rule["target"].get("imagePathToken")
            if pi is not None and rec is not None and rec + pi < len(vals):
                item["image"] = {"path": display(vals[rec + pi][0]), "frame": int_of(tok)}
            else:
                item["image"] = {"path": display(tok), "frame": None}

    def _path(self, root: str, value: str) -> dict[str, Any]:
        value = value.replace("\\", "/")
        if root == "@list":
            try:
                found = self.res.list_base(self.path)
                base = found if found is not None else posixpath.dirname(self.path)
            except Exception:  # a list that does not parse still shows its paths
                base = posixpath.dirname(self.path)
        elif root == "@dir":
            base = posixpath.dirname(self.path.replace("\\", "/"))
        else:
            base = root.strip("/")
        full = f"{base}/{value}" if base else value
        return {"path": full, "exists": self.res.exists(full)}

    # ------------------------------------------------------------------------------------ relations

    def reference(self, relation: str, item_id: int | None, context: str | None) -> dict[str, Any]:
        """Resolve an id through a relation: {relation, id, listPath, path, name} or a reason it failed."""
        rel = self.rs.relations.get(relation)
        out: dict[str, Any] = {"relation": relation, "id": item_id}
        if rel is None:
            return {**out, "resolved": False, "reason": "unknown relation"}
        out["relationTitle"] = localize(rel.get("title"), self.lang) or relation
        if item_id is None:
            return {**out, "resolved": False, "reason": "the token is not an integer id"}
        kind = rel.get("kind", "list")
        if kind == "union":
            tried = []
            for member in rel["relations"]:
                sub = self.reference(member, item_id, context)
                if sub.get("resolved"):
                    return {**sub, "relation": relation, "via": member, "relationTitle": out["relationTitle"]}
                tried.append(member)
            return {**out, "resolved": False, "reason": f"id not registered in {', '.join(tried)}"}
        if kind == "contextual":
            if context is None:
                return {**out, "resolved": False, "reason": "no context token"}
            out["context"] = context
            paths = rel["contextPaths"].get(context)
            if paths is None:
                return {**out, "resolved": False, "reason": f"no list for context {context}"}
        else:
            paths = rel["listPath"]
        candidates = [paths] if isinstance(paths, str) else list(paths)
        list_path = next((p for p in candidates if self.res.exists(p)), None)
        if list_path is None:
            return {**out, "resolved": False, "reason": f"the archive has no {candidates[0]}"}
        out["listPath"] = list_path
        reg = self.res.registry(list_path)
        target = reg.resolve(item_id) if reg is not None else None
        if target is None:
            return {**out, "resolved": False, "reason": f"id {item_id} is not registered in {list_path}"}
        out["path"] = target
        out["resolved"] = True
        out["exists"] = self.res.exists(target)
        if out["exists"]:
            section = rel.get("nameSection", "name")
            key = (target.lower(), section)
            if key not in self._names:
                self._names[key] = self.res.name_of(target, section)
            out["name"] = self._names[key]
        return out


def first_value(text: str, section: str, resolver: Resolver) -> str | None:
    """The first value of the first `[section]` of a script text (string links resolved), for names."""
    try:
        _, order = parse(text)
    except Exception:  # a target that does not lex has no name to show
        return None
    for sec in order:
        if sec.name is not None and sec.name.casefold() == section.casefold():
            vals = sec.values()
            if not vals:
                return None
            tok = vals[0][0]
            link = link_of(tok)
            if link is not None:
                return resolver.link_text(*link) or display(tok)
            return display(tok)
    return None


def str_entries(text: str) -> list[tuple[int, str, str]]:
    """(line, key, value) of a `.str` table: `key>value` lines, `//` comments (pvfUtility StringView.cs)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip("\r\n\0")
        if not s or s.startswith("//") or ">" not in s:
            continue
        key, _, value = s.partition(">")
        out.append((n, key.strip(), value))
    return out
