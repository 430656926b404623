"""The effective (merged) asset: the `inheritFrom` chain and `xai:joinAction` applied, with provenance.

BAB's rules (research/sage.md §2.6, Qibbi/BinaryAssetBuilder `NodeJoiner.cs`): an asset that inherits starts
as a copy of its parent (itself merged the same way) and is joined with its own XML. Its attributes replace
the parent's; each child element is matched against the parent's children — by `id` when the schema lets
that element repeat (modules under `<Behaviors>`, `<Draws>`), by element name when it occurs once — and then,
by `xai:joinAction` (case-insensitive):

- `Append` (the default): a matched element is merged the same way, recursively; an unmatched one is added
  (at the end, or first with `xai:insertPosition="Top"`);
- `Replace` (aliases `Overwrite`, `Override`): the matched element is replaced whole by this one;
- `Remove`: the matched element is dropped (BAB warns when nothing matches).

Nested `xi:include`s are expanded first, as BAB's XInclude reader does at load time: without `xpointer` the
fragment's root element takes the include's place, with `xpointer(/n:X/child::*)` the children of `X`. Every
element and attribute of the answer says which asset, file and line it comes from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.reading import read_regular_file
from deskbridge.kinds.sage._lxml import etree
from deskbridge.kinds.sage.model import SPLICED_ROOT, AssetDef, SageIndex
from deskbridge.kinds.sage.project import schema_entry
from deskbridge.kinds.sage.queries import (
    INHERITANCE_MAX,
    _not_found,
    definitions,
    effective,
    inherit_target,
    page,
)
from deskbridge.kinds.sage.records import (
    FILE_MAX_BYTES,
    SPECIAL_ROOT_CHILDREN,
    XAI_JOIN,
    XI_INCLUDE,
    _Locator,
    xml_parser,
)
from deskbridge.kinds.sage.schema import _Compiler, collect_schema

XAI_POSITION = "{uri:ea.com:eala:asset:instance}insertPosition"
REPLACE = frozenset({"replace", "overwrite", "override"})
XPOINTER_CHILDREN = re.compile(r"xpointer\(\s*/(?:\w+:)?([\w.-]+)/child::\*\s*\)")
FRAGMENT_DEPTH_MAX = 8

_STRUCTURES: dict[str, _Compiler] = {}
"""Schema entry → its uncompiled declarations (child types and which children repeat), read on first use."""


@dataclass
class Node:
    """One element of a merged asset and where each part of it comes from."""

    name: str
    id: str | None
    attrs: dict[str, tuple[str, str, int, str]]
    """Attribute → (value, file, line, asset id that wrote it)."""
    text: tuple[str, str, int, str] | None
    children: list[Node]
    file: str
    line: int
    asset: str
    join: str = ""
    position: str = ""
    how: str = "own"
    """`own`, `inherited`, `merged`, `replaced` (relative to the parent chain)."""
    base: tuple[str, int, str] | None = None
    """For merged and replaced elements: (file, line, asset) of the parent's element they took over."""
    site: tuple[str, int] | None = None
    """For an element spliced in by an `xi:include`: that include's (file, line)."""

    def copy(self, how: str | None = None) -> Node:
        """A deep copy (merging never changes the parent's tree), optionally marking every element."""
        return Node(
            self.name,
            self.id,
            dict(self.attrs),
            self.text,
            [c.copy(how) for c in self.children],
            self.file,
            self.line,
            self.asset,
            self.join,
            self.position,
            how or self.how,
            self.base,
            self.site,
        )


BITFLAG = re.compile(r"^[+-][A-Za-z0-9_]+$")


@dataclass
class _Join:
    structure: _Compiler | None
    removed: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    # --- schema -----------------------------------------------------------------------------------
    def _chain(self, key: str | None) -> list[str]:
        """`key` and its base types, base first (the order their children are declared in)."""
        s = self.structure
        out: list[str] = []
        while key and s is not None and key in s.c_children and key not in out:
            out.append(key)
            key = s.c_base.get(key)
        return out[::-1]

    def layout(self, key: str | None) -> dict[str, str]:
        s = self.structure
        out: dict[str, str] = {}
        for t in self._chain(key):
            out.update(s.c_layout.get(t, {}) if s else {})
        return out

    def child_type(self, key: str | None, name: str) -> str | None:
        s = self.structure
        for t in reversed(self._chain(key)):
            hit = s.c_children[t].get(name) if s else None
            if hit is not None:
                return hit.split("=>", 1)[0] or None
        return None

    def is_list(self, key: str | None, attr: str) -> bool:
        """Whether `attr` of type `key` is a list (BAB applies `+FLAG -FLAG` edits to enumeration lists)."""
        s = self.structure
        if s is None:
            return False
        for t in reversed(self._chain(key)):
            spec = s.c_attrs.get(t, {}).get(attr)
            if spec is not None:
                seen: set[str] = set()
                st = spec[0]
                while st and st not in seen:
                    seen.add(st)
                    entry = s.simple.get(st)
                    if entry is None:
                        return False
                    if entry[2]:
                        return True
                    st = entry[1]
                return False
        return False

    # --- merging (BAB NodeJoiner's rules) ---------------------------------------------------------
    def apply(self, dest: Node, src: Node, key: str | None, inherited: str) -> None:
        """Join `src` into `dest` in place: children first, then text, then attributes."""
        layout = self.layout(key)
        for c in src.children:
            action = (c.join or inherited).strip().casefold() or "append"
            kind = layout.get(c.name)
            if kind is None:  # not in the schema (or no schema): ids mark repeatable modules
                kind = "choice-many" if c.id is not None else "seq"
            idx: int | None = None
            if kind.endswith("-many"):
                if c.id is not None:
                    idx = next((i for i, b in enumerate(dest.children) if b.id == c.id), None)
            elif kind == "choice-one" and len(dest.children) == 1:
                idx = 0
            else:
                idx = next((i for i, b in enumerate(dest.children) if b.name == c.name), None)
            base_of: Node | None = None
            if idx is not None and (dest.children[idx].name != c.name or action in ("remove", *REPLACE)):
                base_of = dest.children.pop(idx)
                if action == "remove":
                    self.removed.append(
                        {
                            "element": base_of.name,
                            "id": base_of.id,
                            "from": base_of.asset,
                            "file": base_of.file,
                            "line": base_of.line,
                            "removedBy": {
                                "from": c.asset,
                                "file": (c.site or (c.file, c.line))[0],
                                "line": (c.site or (c.file, c.line))[1],
                            },
                        }
                    )
                idx = None
            elif idx is None and action == "remove":
                where = c.site or (c.file, c.line)
                self.warnings.append(
                    f"{where[0]}:{where[1]}: <{c.name}"
                    + (f' id="{c.id}"' if c.id else "")
                    + "> with xai:joinAction Remove matches nothing inherited (BAB warns and ignores it)"
                )
            if action == "remove":
                continue
            if idx is None:
                node = Node(
                    c.name,
                    c.id,
                    {},
                    None,
                    [],
                    c.file,
                    c.line,
                    c.asset,
                    c.join,
                    c.position,
                    "own",
                    None,
                    c.site,
                )
                if base_of is not None:
                    node.how, node.base = "replaced", (base_of.file, base_of.line, base_of.asset)
                self._insert(dest, node, kind, layout, c.position.strip().casefold() == "top")
                self.apply(node, c, self.child_type(key, c.name), action)
            else:
                node = dest.children[idx]
                node.how, node.base = "merged", (node.file, node.line, node.asset)
                node.file, node.line, node.asset, node.join, node.site = (
                    c.file,
                    c.line,
                    c.asset,
                    c.join,
                    c.site,
                )
                if c.id is not None:
                    node.id = c.id
                self.apply(node, c, self.child_type(key, c.name), action)
        if src.text is not None:
            if dest.text is not None and dest.text[0]:
                # BAB appends the text node: inherited text without Replace is concatenated.
                v, f, ln, a = src.text
                dest.text = (dest.text[0] + v, f, ln, a)
            else:
                dest.text = src.text
        for k, spec in src.attrs.items():
            v = spec[0]
            old = dest.attrs.get(k)
            tokens = v.split()
            if old is not None and tokens and all(BITFLAG.match(t) for t in tokens) and self.is_list(key, k):
                flags = old[0].split()
                for t in tokens:
                    if t[0] == "+" and t[1:] not in flags:
                        flags.append(t[1:])
                    elif t[0] == "-" and t[1:] in flags:
                        flags.remove(t[1:])
                dest.attrs[k] = (" ".join(flags), spec[1], spec[2], spec[3])
            else:
                dest.attrs[k] = spec

    def _insert(self, dest: Node, node: Node, kind: str, layout: dict[str, str], top: bool) -> None:
        """Where BAB puts a new child: by schema order in a sequence (after the last child of the same
        name, or of a name declared before it), at the end (or first, for Top) in a choice."""
        kids = dest.children
        if kind.startswith("seq") and kids:
            order = list(layout)
            rank = order.index(node.name) if node.name in order else len(order)
            at = 0
            for i, b in enumerate(kids):
                if b.name == node.name:
                    if top:
                        at = i
                        break
                    at = i + 1
                elif (order.index(b.name) if b.name in order else len(order)) < rank:
                    at = i + 1
            kids.insert(at, node)
        elif top:
            kids.insert(0, node)
        else:
            kids.append(node)


def _structure(index: SageIndex) -> _Compiler | None:
    entry = schema_entry(index.sdk) if index.sdk else None
    if entry is None:
        return None
    key = str(entry)
    hit = _STRUCTURES.get(key)
    if hit is None:
        hit = _STRUCTURES[key] = collect_schema(entry)
    return hit


class _Loader:
    """Parses the files of a chain once each and turns asset elements into `Node` trees."""

    def __init__(self, index: SageIndex) -> None:
        self.index = index
        self.docs: dict[str, tuple[etree._Element | None, _Locator]] = {}
        self.edges = {(e.file, e.line): e.target for e in index.includes if e.kind == "xi:include"}

    def doc(self, path: str) -> tuple[etree._Element | None, _Locator]:
        hit = self.docs.get(path)
        if hit is None:
            shown = self.index.display(path)
            self.index.check_scope(path, shown)
            try:
                data = read_regular_file(path, max_bytes=FILE_MAX_BYTES, shown_as=shown)
            except BridgeError as exc:
                raise BridgeError(
                    exc.code,
                    exc.message,
                    hint="The file changed on disk; call sage_get_status until the re-index is done, then "
                    "call sage_get_effective_asset again.",
                ) from None
            try:
                root = etree.fromstring(data, xml_parser()) if data.strip() else None
            except etree.XMLSyntaxError:
                root = None
            hit = self.docs[path] = (root, _Locator(data))
        return hit

    def element(self, d: AssetDef) -> tuple[etree._Element, _Locator]:
        root, loc = self.doc(d.file)
        if root is None:
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                f"{self.index.display(d.file)} no longer parses; the merged {d.type} {d.id!r} cannot be built",
                hint="Fix the file (sage_list_diagnostics code parse-error), then call sage_get_effective_asset again.",
            )
        if d.index == SPLICED_ROOT:
            return root, loc
        name = root.tag.rpartition("}")[2] if isinstance(root.tag, str) else ""
        if name == "AssetDeclaration":
            assets = [
                c
                for c in root.iterchildren(tag=etree.Element)
                if c.tag != XI_INCLUDE
                and c.tag.rpartition("}")[2] not in SPECIAL_ROOT_CHILDREN
                and c.tag.rpartition("}")[2] != "Include"
                and c.get("id")
            ]
        else:
            kids = [c for c in root.iterchildren(tag=etree.Element) if c.get("id") and c.tag != XI_INCLUDE]
            assets = ([root] if root.get("id") else []) + kids
        unique = assets
        if not 0 <= d.index < len(unique):
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                f"{d.type} {d.id!r} is no longer where the index saw it",
                hint="Call sage_get_status until the re-index is done, then call sage_get_effective_asset again.",
            )
        return unique[d.index], loc

    def node(self, el: etree._Element, path: str, loc: _Locator, asset: str, depth: int = 0) -> list[Node]:
        """`el` as nodes: one, or for an `xi:include` the fragment's element(s) it stands for."""
        if el.tag == XI_INCLUDE:
            return self._include(el, path, loc, asset, depth)
        name = el.tag.rpartition("}")[2]
        line = loc.start_line(el.sourceline or 0, _qualified(el))
        attrs = {
            k: (v, path, line, asset) for k, v in el.attrib.items() if not k.startswith("{") and k != "TypeId"
        }
        text = (el.text.strip(), path, line, asset) if el.text and el.text.strip() else None
        kids: list[Node] = []
        for c in el.iterchildren(tag=etree.Element):
            kids.extend(self.node(c, path, loc, asset, depth))
        return [
            Node(
                name,
                el.get("id"),
                attrs,
                text,
                kids,
                path,
                line,
                asset,
                el.get(XAI_JOIN, ""),
                el.get(XAI_POSITION, ""),
            )
        ]

    def _include(self, el: etree._Element, path: str, loc: _Locator, asset: str, depth: int) -> list[Node]:
        line = loc.start_line(el.sourceline or 0, _qualified(el))
        target = self.edges.get((path, line))
        if not target or depth >= FRAGMENT_DEPTH_MAX:
            return []
        root, floc = self.doc(target)
        if root is None:
            return []
        m = XPOINTER_CHILDREN.search(el.get("xpointer") or "")
        parts = list(root.iterchildren(tag=etree.Element)) if m else [root]
        out: list[Node] = []
        for p in parts:
            out.extend(self.node(p, target, floc, asset, depth + 1))
        for n in out:
            # `xai:joinAction` / `xai:insertPosition` written on the include apply to what it splices in
            # (Kane's Wrath removes inherited fragments this way).
            n.join = n.join or el.get(XAI_JOIN, "")
            n.position = n.position or el.get(XAI_POSITION, "")
            n.site = n.site or (path, line)
        return out


def _qualified(el: etree._Element) -> str:
    local = el.tag.rpartition("}")[2]
    return f"{el.prefix}:{local}" if el.prefix else local


def get_effective_asset(
    index: SageIndex, asset_type: str, ident: str, cursor: str | None = None, limit: int | None = None
) -> dict[str, Any]:
    defs = definitions(index, ident, asset_type)
    if not defs:
        raise _not_found(asset_type, ident)
    start = effective(index, defs)
    if not start.file:
        raise BridgeError(
            ErrorCode.NOT_FOUND,
            f"{asset_type} {ident!r} is known only from a compiled manifest; there is no XML to merge",
            hint="Call sage_find_asset to see where it is defined.",
        )
    chain: list[AssetDef] = [start]
    stop = "root"
    while len(chain) <= INHERITANCE_MAX:
        ref, parent = inherit_target(index, chain[-1])
        if ref is None:
            break
        if parent is None:
            stop = "missing"
            break
        if any(parent is c for c in chain):
            stop = "cycle"
            break
        if not parent.file:
            stop = "manifest"  # a compiled parent: its XML is not available
            break
        chain.append(parent)
    else:
        stop = "limit"
    joiner = _Join(_structure(index))
    loader = _Loader(index)
    merged: Node | None = None
    for d in reversed(chain):
        el, loc = loader.element(d)
        node = loader.node(el, d.file, loc, d.id)[0]
        key = joiner.structure.top_elements.get(node.name) if joiner.structure else None
        key = (index.model.asset_types.get(node.name) if index.model else None) or key or node.name
        if merged is None:
            merged = node
            continue
        # BAB's Override: a copy of the parent, then the asset's own XML joined onto it.
        base = merged.copy()
        base.how, base.base = "merged", (merged.file, merged.line, merged.asset)
        base.file, base.line, base.asset = node.file, node.line, node.asset
        joiner.apply(base, node, key, node.join)
        merged = base
    assert merged is not None
    merged.attrs.pop("inheritFrom", None) if len(chain) > 1 else None
    rows: list[dict[str, Any]] = []
    _flatten(index, merged, "", 0, rows, start.id)
    out = page(rows, cursor, limit)
    out.update(
        type=start.type,
        id=start.id,
        file=index.display(start.file),
        line=start.line,
        chain=[{"type": d.type, "id": d.id, "file": index.display(d.file), "line": d.line} for d in chain],
        stop=stop,
        removed=[
            {
                **r,
                "file": index.display(r["file"]),
                "removedBy": {**r["removedBy"], "file": index.display(r["removedBy"]["file"])},
            }
            for r in joiner.removed
        ],
        warnings=joiner.warnings,
    )
    return out


def _flatten(
    index: SageIndex, n: Node, parent: str, depth: int, rows: list[dict[str, Any]], own: str
) -> None:
    label = f"{n.name}#{n.id}" if n.id is not None and depth > 0 else n.name
    path = f"{parent}/{label}" if parent else label
    how = n.how
    if how in ("own", "merged", "replaced") and n.asset != own:
        how = "inherited"  # settled further up the chain: the asset itself does not touch it
    row: dict[str, Any] = {
        "path": path,
        "depth": depth,
        "element": n.name,
        "id": n.id,
        "how": how,
        "from": n.asset,
        "file": index.display(n.file),
        "line": n.line,
        "attributes": {
            k: {"value": v, "from": a, "file": index.display(f), "line": ln}
            for k, (v, f, ln, a) in n.attrs.items()
        },
    }
    if n.text is not None:
        v, f, ln, a = n.text
        row["text"] = {"value": v, "from": a, "file": index.display(f), "line": ln}
    if n.join:
        row["joinAction"] = n.join
    if n.base is not None and how != "inherited":
        row["base"] = {"from": n.base[2], "file": index.display(n.base[0]), "line": n.base[1]}
    if n.site is not None:
        row["includedAt"] = {"file": index.display(n.site[0]), "line": n.site[1]}
    rows.append(row)
    for c in n.children:
        _flatten(index, c, path, depth + 1, rows, own)
