"""Compile the SDK's XSD set once into a compact model of which attributes and element contents are references.

What the model answers (research/sage.md §2.5): the type of an element given its parent's type, the
target asset type of every reference attribute and reference element content — declared in any of the
three styles (a named `*Ref` simple type with `xas:refType`, `xas:refType` on the attribute/element
itself, or a complex type with `xas:refType` and simple content) — and each type's base-type chain, so a
reference to a base type (`BaseAssetType`, `BaseAudioEventInfo`) accepts every subtype. `Poid` ids are
pipeline-local names, never references. The compiled model is cached on disk keyed by the XSD files'
content hashes.
"""

from __future__ import annotations

import os
from pathlib import Path

from deskbridge.kinds.sage._atomic import atomic_write
from deskbridge.kinds.sage._lxml import etree
from deskbridge.kinds.sage._record import Record
from deskbridge.kinds.sage._sha1 import bulk_sha1, sha1
from deskbridge.kinds.sage.paths import CaseFoldTree

TYPE_CHECKING = False  # `typing` is not loaded by a warm start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

XS = "{http://www.w3.org/2001/XMLSchema}"
_XS_SIMPLE = XS + "simpleType"
_XS_COMPLEX = XS + "complexType"
_XS_ELEMENT = XS + "element"
_XS_SIMPLE_CONTENT = XS + "simpleContent"
XAS_REFTYPE = "{uri:ea.com:eala:asset:schema}refType"
MODEL_VERSION = 4
"""Bump when the compiled model's shape changes, so old caches are ignored."""

_UNSET: Any = object()

RefSpec = tuple[str, bool]
"""(target asset type, value is a whitespace-separated list)."""


class SchemaModel(Record):
    """The compiled XSD knowledge the record extractor and the queries need."""

    _fields = (
        "asset_types",
        "children",
        "attr_refs",
        "content_refs",
        "bases",
        "fallback",
        "with_refs",
        "digest",
        "problems",
    )

    def __init__(
        self,
        asset_types: dict[str, str] | None = None,
        children: dict[str, dict[str, str]] | None = None,
        attr_refs: dict[str, dict[str, RefSpec]] | None = None,
        content_refs: dict[str, RefSpec] | None = None,
        bases: dict[str, str] | None = None,
        fallback: dict[str, str] | None = None,
        with_refs: set[str] | None = None,
        digest: str = "",
        problems: list[tuple[str, int, str]] | None = None,
    ) -> None:
        self.asset_types: dict[str, str] = {} if asset_types is None else asset_types
        """Top-level asset element name → its type key (from `AssetDeclaration`'s choice)."""
        self.children: dict[str, dict[str, str]] = {} if children is None else children
        """Type key → {child element name → child type key}, base types included; a child whose subtree
        cannot hold any reference maps to '' so the extractor skips it with one lookup."""
        self.attr_refs: dict[str, dict[str, RefSpec]] = {} if attr_refs is None else attr_refs
        """Type key → {attribute name → reference spec}, base types included."""
        self.content_refs: dict[str, RefSpec] = {} if content_refs is None else content_refs
        """Type key → reference spec of the element's text content."""
        self.bases: dict[str, str] = {} if bases is None else bases
        """Complex type → its base complex type."""
        self.fallback: dict[str, str] = {} if fallback is None else fallback
        """Element name → type key when the name means one type everywhere (types fragment files' roots)."""
        self.with_refs: set[str] = set() if with_refs is None else with_refs
        """Type keys whose subtree can hold a reference; the extractor skips every other subtree."""
        self.digest = digest
        self.problems: list[tuple[str, int, str]] = [] if problems is None else problems
        """(file, line, message) of each XSD that could not be read or parsed whole, or an `xs:include`
        that names no file: the model lacks what they declare, so references they type are missed."""

    def chain(self, asset_type: str) -> list[str]:
        """`asset_type`, its type key and every base type, nearest first."""
        out = [asset_type]
        t: str | None = self.asset_types.get(asset_type, asset_type)
        seen: set[str] = set()
        while t and t not in seen:
            if t != asset_type:
                out.append(t)
            seen.add(t)
            t = self.bases.get(t)
        return out

    def reference_targets(self) -> set[str]:
        """Every type name some reference in the schema can point at, except the generic roots: a
        `BaseAssetReference` may name any asset, which says nothing about which types are meant to be used."""
        cached: set[str] | None = getattr(self, "_targets", None)
        if cached is None:
            cached = {spec[0] for specs in self.attr_refs.values() for spec in specs.values()}
            cached |= {spec[0] for spec in self.content_refs.values()}
            cached -= {"BaseAssetType", "BaseInheritableAsset"}
            self._targets = cached
        return cached

    def assignable(self, asset_type: str, ref_type: str) -> bool:
        """True when an asset of `asset_type` may stand where `ref_type` is expected."""
        return asset_type == ref_type or ref_type in self.chain(asset_type)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": MODEL_VERSION,
            "digest": self.digest,
            "assetTypes": self.asset_types,
            "children": self.children,
            "attrRefs": {k: {a: list(v) for a, v in d.items()} for k, d in self.attr_refs.items()},
            "contentRefs": {k: list(v) for k, v in self.content_refs.items()},
            "bases": self.bases,
            "fallback": self.fallback,
            "withRefs": sorted(self.with_refs),
            "problems": [list(p) for p in self.problems],
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> SchemaModel:
        return cls(
            asset_types=raw["assetTypes"],
            children=raw["children"],
            attr_refs={k: {a: (v[0], bool(v[1])) for a, v in d.items()} for k, d in raw["attrRefs"].items()},
            content_refs={k: (v[0], bool(v[1])) for k, v in raw["contentRefs"].items()},
            bases=raw["bases"],
            fallback=raw["fallback"],
            with_refs=set(raw["withRefs"]),
            digest=raw["digest"],
            problems=[(str(f), int(n), str(m)) for f, n, m in raw.get("problems", ())],
        )


def _first(node: etree._Element, tag: str) -> etree._Element | None:
    """`node.find(tag)` for a plain `{namespace}name`: its first child with that tag, found without
    ElementPath's parsing and caching of the path (a quarter of collecting the RA3 schemas)."""
    for child in node.iterchildren(tag):
        return child
    return None


def _local(qname: str | None) -> str | None:
    """`xs:string` → None (built-ins are never references); `at:Foo` / `Foo` → `Foo`."""
    if not qname:
        return None
    prefix, _, name = qname.rpartition(":")
    if prefix == "xs":
        return None
    return name


class _Compiler:
    """One pass over every reachable XSD document, then flattening."""

    def __init__(self) -> None:
        # simple type → (own refType, base simple type, list item type)
        self.simple: dict[str, tuple[str | None, str | None, str | None]] = {}
        # complex type → own attrs {name: (type, refType)}, own children {name: type key},
        # base complex type, simple-content base, own refType
        self.c_attrs: dict[str, dict[str, tuple[str | None, str | None]]] = {}
        self.c_children: dict[str, dict[str, str]] = {}
        self.c_base: dict[str, str] = {}
        self.c_content: dict[str, str] = {}
        self.c_ref: dict[str, str] = {}
        self.elem_ref: dict[str, str] = {}  # synthetic key for `<xs:element type=… xas:refType=…>`
        self.problems: list[tuple[str, int, str]] = []
        """What `SchemaModel.problems` says: XSDs the collection could not read or parse whole."""
        self.top_elements: dict[str, str] = {}
        self.declared_as: dict[str, set[str]] = {}
        self.c_layout: dict[str, dict[str, str]] = {}
        """Complex type → its own child elements in declaration order → how they occur: `seq` / `seq-many`
        (in a sequence, `maxOccurs` 1 / above 1) or `choice-one` / `choice-many` (in a choice that may
        repeat or not). BAB's joiner matches `*-many` children by id and lets a `choice-one` child
        replace whatever single child is there (research/sage.md §2.6)."""

    # --- collection -------------------------------------------------------------------------------
    def add_document(self, root: etree._Element) -> None:
        for node in root.iterchildren(tag=etree.Element):
            tag = node.tag
            name = node.get("name")
            if not name:
                continue
            if tag == _XS_SIMPLE:
                self._simple(name, node, node.get(XAS_REFTYPE))
            elif tag == _XS_COMPLEX:
                self._complex(name, node)
            elif tag == _XS_ELEMENT:
                self.top_elements[name] = self._element_type(name, node, owner="")

    def _simple(self, name: str, node: etree._Element, ref: str | None) -> None:
        base = item = None
        for child in node.iterchildren(tag=etree.Element):
            ctag = child.tag
            if ctag == XS + "restriction":
                base = _local(child.get("base"))
                inner = _first(child, _XS_SIMPLE)
                if base is None and inner is not None:
                    base = f"{name}~base"
                    self._simple(base, inner, inner.get(XAS_REFTYPE))
            elif ctag == XS + "list":
                item = _local(child.get("itemType"))
                inner = _first(child, _XS_SIMPLE)
                if item is None and inner is not None:
                    item = f"{name}~item"
                    self._simple(item, inner, inner.get(XAS_REFTYPE))
        self.simple[name] = (ref, base, item)

    def _complex(self, name: str, node: etree._Element) -> None:
        attrs: dict[str, tuple[str | None, str | None]] = {}
        children: dict[str, str] = {}
        layout: dict[str, str] = {}
        if node.get(XAS_REFTYPE):
            self.c_ref[name] = node.get(XAS_REFTYPE)  # type: ignore[assignment]
        # (particle, nearest particle kind, whether that particle or one around it repeats); in document
        # order (a queue, not a stack) so the layout keeps the declaration order.
        stack = [(node, "seq", False)]
        while stack:
            cur, kind, many = stack.pop(0)
            for child in cur.iterchildren(tag=etree.Element):
                ctag = child.tag
                tag = ctag[len(XS) :] if ctag.startswith(XS) else ""
                if tag == "attribute":
                    aname = child.get("name")
                    if not aname:
                        continue
                    atype = _local(child.get("type"))
                    inner = _first(child, _XS_SIMPLE) if atype is None else None
                    if atype is None and inner is not None:
                        atype = f"{name}@{aname}"
                        self._simple(atype, inner, inner.get(XAS_REFTYPE))
                    attrs[aname] = (atype, child.get(XAS_REFTYPE))
                elif tag == "element":
                    ename = child.get("name")
                    if ename:
                        children[ename] = self._element_type(ename, child, owner=name)
                        if kind == "choice":
                            layout[ename] = "choice-many" if many else "choice-one"
                        else:
                            layout[ename] = "seq-many" if _repeating(child) else "seq"
                elif tag in ("extension", "restriction"):
                    base = _local(child.get("base"))
                    if base:
                        if cur.tag == _XS_SIMPLE_CONTENT:
                            self.c_content[name] = base
                        else:
                            self.c_base[name] = base
                    stack.append((child, kind, many))
                elif tag == "choice":
                    stack.append((child, "choice", many or _repeating(child)))
                elif tag == "sequence":
                    stack.append((child, "seq", many or _repeating(child)))
                elif tag in ("all", "complexContent", "simpleContent"):
                    stack.append((child, kind, many))
        self.c_attrs[name] = attrs
        self.c_children[name] = children
        if layout:
            self.c_layout[name] = layout

    def _element_type(self, ename: str, node: etree._Element, owner: str) -> str:
        ref = node.get(XAS_REFTYPE)
        etype = _local(node.get("type"))
        if etype is None:
            inner_c = _first(node, _XS_COMPLEX)
            inner_s = _first(node, _XS_SIMPLE) if inner_c is None else None
            if inner_c is not None:
                etype = f"{owner}/{ename}"
                self._complex(etype, inner_c)
            elif inner_s is not None:
                etype = f"{owner}/{ename}"
                self._simple(etype, inner_s, inner_s.get(XAS_REFTYPE))
        if ref:
            key = f"{etype or ''}=>{ref}"
            self.elem_ref[key] = ref
            etype = key
        etype = etype or ""
        self.declared_as.setdefault(ename, set()).add(etype)
        return etype

    # --- resolution -------------------------------------------------------------------------------
    def simple_ref(self, name: str | None, own_ref: str | None = None) -> RefSpec | None:
        """The reference a value of simple type `name` makes, or None (Poid ids never reference)."""
        is_list = False
        ref = own_ref
        seen: set[str] = set()
        t = name
        while t and t not in seen:
            seen.add(t)
            if t == "Poid":
                return None
            entry = self.simple.get(t)
            if entry is None:
                break
            own, base, item = entry
            ref = ref or own
            if item:
                is_list = True
                t = item
            else:
                t = base
        return (ref, is_list) if ref else None

    def content_ref(self, key: str) -> RefSpec | None:
        if key in self.elem_ref:
            return self.simple_ref(key.split("=>", 1)[0] or None, self.elem_ref[key])
        if key in self.simple:
            return self.simple_ref(key)
        if key in self.c_ref or key in self.c_content:
            return self.simple_ref(self.c_content.get(key), self.c_ref.get(key))
        return None

    def complex_chain(self, key: str) -> list[str]:
        out, seen, t = [], set(), key
        while t and t not in seen and (t in self.c_attrs):
            out.append(t)
            seen.add(t)
            t = self.c_base.get(t)
        return out

    def build(self) -> SchemaModel:
        model = SchemaModel(problems=list(self.problems))
        decl = self.top_elements.get("AssetDeclaration")
        model.asset_types = {
            name: t
            for name, t in self.c_children.get(decl or "", {}).items()
            if name not in ("Tags", "Includes", "Defines")
        }
        # An attribute's spec depends only on its (type, refType): base types' attributes are resolved once,
        # not again for every type deriving from them (~11 k `simple_ref` calls on RA3's schemas).
        specs: dict[tuple[str | None, str | None], RefSpec | None] = {}
        for key in self.c_attrs:
            children: dict[str, str] = {}
            attrs: dict[str, RefSpec] = {}
            for t in reversed(self.complex_chain(key)):
                children.update(self.c_children[t])
                for aname, typed in self.c_attrs[t].items():
                    spec = specs.get(typed, _UNSET)
                    if spec is _UNSET:
                        spec = specs[typed] = self.simple_ref(*typed)
                    if spec:
                        attrs[aname] = spec
                    else:
                        attrs.pop(aname, None)
            if children:
                model.children[key] = children
            if attrs:
                model.attr_refs[key] = attrs
            if key in self.c_base:
                model.bases[key] = self.c_base[key]
        for key in {*self.simple, *self.c_attrs, *self.elem_ref}:
            spec = self.content_ref(key)
            if spec:
                model.content_refs[key] = spec
        model.fallback = {n: next(iter(ts)) for n, ts in self.declared_as.items() if len(ts) == 1}
        for name, t in model.asset_types.items():
            model.fallback.setdefault(name, t)
        # Which types can hold a reference anywhere below them: a fixpoint over the child graph.
        with_refs = set(model.attr_refs) | set(model.content_refs)
        changed = True
        while changed:
            changed = False
            for key, kids in model.children.items():
                if key not in with_refs and any(k in with_refs for k in kids.values()):
                    with_refs.add(key)
                    changed = True
        model.with_refs = with_refs
        model.children = {
            t: {n: (ct if ct in with_refs else "") for n, ct in kids.items()}
            for t, kids in model.children.items()
        }
        return model


def schema_files(schema_dir: Path) -> list[tuple[str, str]]:
    """(relative path, absolute path) of every `.xsd` under the SDK's schema folder, in a stable order."""
    base = str(schema_dir)
    out: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        # `os.walk` joins each folder onto `base`, so slicing is `os.path.relpath` without its normalising.
        rel_dir = dirpath[len(base) :].lstrip(os.sep)
        for f in sorted(filenames):
            if f.casefold().endswith(".xsd"):
                out.append((os.path.join(rel_dir, f) if rel_dir else f, os.path.join(dirpath, f)))
    return out


_READ_DIGESTS: dict[str, bytes] | None = None
"""While `load_schema` hashes the XSDs right after compiling them (a cold build's schema process): the SHA-1
of every file the compile read, by path, so `schema_digest` hashes the bytes the model was compiled from
instead of opening ~800 files again (21 -> 6 ms on RA3's schemas). None at any other time."""


def schema_digest(entry: Path) -> str:
    """SHA-1 over every XSD file's relative path and content: the compiled model's cache key."""
    h = sha1(f"v{MODEL_VERSION}".encode())
    known = _READ_DIGESTS or {}
    for rel, path in schema_files(entry.parent):
        h.update(rel.encode())
        digest = known.get(path)
        if digest is None:
            with open(path, "rb") as fh:
                digest = bulk_sha1(fh.read()).digest()
        h.update(digest)
    return h.hexdigest()


def schema_fingerprint(entry: Path) -> str:
    """SHA-1 over every XSD file's relative path, size and mtime: a cheap stand-in for `schema_digest` that
    lets a warm start skip reading 1.5 MB of schemas (the digest is recomputed whenever this differs)."""
    parts = [f"v{MODEL_VERSION}"]
    for rel, path in schema_files(entry.parent):
        st = os.stat(path)
        parts.append(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0")
    return sha1("".join(parts).encode()).hexdigest()  # one update: the same digest as one per file


def _repeating(node: etree._Element) -> bool:
    occurs = node.get("maxOccurs")
    return occurs == "unbounded" or (occurs is not None and occurs.isdigit() and int(occurs) > 1)


def compile_schema(entry: Path, read: dict[str, bytes] | None = None) -> SchemaModel:
    """Parse `entry` and everything it `xs:include`s (case-insensitively, as the EA files need); `read`, when
    given, receives the SHA-1 of every file parsed."""
    return collect_schema(entry, read).build()


def collect_schema(entry: Path, read: dict[str, bytes] | None = None) -> _Compiler:
    """Every type declaration reachable from `entry`, before flattening (the joiner reads it directly)."""
    compiler = _Compiler()
    tree = CaseFoldTree()
    # No blank text nodes and no xml:id hash: the compile reads elements and attributes only (the same
    # model, compared on the RA3 and KW schemas; ~20 % fewer nodes to build).
    parser = etree.XMLParser(
        remove_comments=True,
        recover=True,
        resolve_entities=False,
        no_network=True,
        remove_blank_text=True,
        collect_ids=False,
    )
    todo = [str(entry)]
    seen: set[str] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            if read is not None:
                read[path] = bulk_sha1(data).digest()
            root = etree.fromstring(data, parser, base_url=path)
        except OSError as exc:
            compiler.problems.append((path, 0, f"the schema cannot be read ({exc.strerror or exc})"))
            continue
        except etree.XMLSyntaxError as exc:
            compiler.problems.append((path, exc.lineno or 0, f"the schema does not parse: {exc.msg}"))
            continue
        # Recovered (parsed in part): what follows the first error is missing from the model.
        errors = [e for e in parser.error_log if e.level >= etree.ErrorLevels.ERROR]
        if errors:
            compiler.problems.append(
                (path, errors[0].line, f"the schema does not parse whole: {errors[0].message}")
            )
        if root is None:
            continue
        for inc in root.iterchildren(XS + "include", XS + "redefine"):
            loc = inc.get("schemaLocation")
            if loc:
                hit = tree.find(os.path.dirname(path), loc.replace("\\", "/").split("/"))
                if hit:
                    todo.append(hit)
                else:
                    compiler.problems.append(
                        (path, inc.sourceline or 0, f"xs:include {loc!r} does not resolve to a file")
                    )
        compiler.add_document(root)
    return compiler


DEFERRED_CACHE_WRITES: list[tuple[Path, Callable[[], bytes]]] | None = None
"""When a list (only in a cold build's schema process, `parallel._compile_main`), `load_schema` appends its
cache write here — (path, what makes the bytes) — instead of writing at once: that process sends the model
first, so the workers waiting for it do not also wait for the JSON and the gzip, and the parent writes the
bytes (it loads `core.files` for its own cache anyway, the schema process then never does)."""


EARLY_MODEL: Callable[[SchemaModel], None] | None = None
"""When set (only in a cold build's schema process, `parallel._compile_main`) and the schema cache holds no
file at all, so none can match: `load_schema` compiles first and hands the model to this before it hashes the
XSDs for the cache key (~15 ms that the workers waiting for the model then do not wait for)."""


def _cache_is_empty(cache_dir: Path | None) -> bool:
    if cache_dir is None:
        return True
    try:
        with os.scandir(cache_dir / "schema") as it:
            return not any(e.name.endswith(".json.gz") for e in it)
    except OSError:
        return True


def load_schema(
    entry: Path, cache_dir: Path | None, digest: str | Callable[[], str] | None = None
) -> SchemaModel:
    """The compiled model for the SDK whose entry schema is `entry`, from the disk cache when valid.
    `digest` is `schema_digest(entry)` when the caller already has it (or gives it when called)."""
    import gzip  # not at the top: a warm start (which needs only `schema_fingerprint`) never loads the model
    import json
    import zlib

    global _READ_DIGESTS
    early = EARLY_MODEL
    if early is not None and _cache_is_empty(cache_dir):
        read: dict[str, bytes] = {}
        model = compile_schema(entry, read)
        early(model)
        _READ_DIGESTS = read  # the digest (the caller's `schema_digest`) hashes what was just compiled
        try:
            digest = (digest() if callable(digest) else digest) or schema_digest(entry)
        finally:
            _READ_DIGESTS = None
        model.digest = digest
    else:
        digest = (digest() if callable(digest) else digest) or schema_digest(entry)
        cache_file = cache_dir / "schema" / f"{digest}.json.gz" if cache_dir else None
        if cache_file is not None:
            try:
                raw = json.loads(gzip.decompress(cache_file.read_bytes()))
                if raw.get("version") == MODEL_VERSION and raw.get("digest") == digest:
                    return SchemaModel.from_json(raw)
            except (OSError, ValueError, KeyError, TypeError, EOFError, zlib.error):
                pass  # absent, stale or torn: compiled again
        model = compile_schema(entry)
        model.digest = digest
    if cache_dir is not None:
        path = cache_dir / "schema" / f"{digest}.json.gz"

        def make() -> bytes:
            # Level 1: 4 ms instead of 9 (76 instead of 63 KB), and read back as fast.
            return gzip.compress(json.dumps(model.to_json()).encode(), compresslevel=1)

        if DEFERRED_CACHE_WRITES is not None:
            DEFERRED_CACHE_WRITES.append((path, make))
        else:
            # Not durable: a torn cache file is ignored above and compiled again.
            atomic_write(path, make(), durable=False)
    return model
