"""The parsed-document model of `.pvf.js` scripts: sections and typed values over the script text codec.

A document is the token list of `script.text.lex` (the same dialect `pvf_read_file` shows) arranged as a
tree: a section is a tag token, the value tokens that follow it up to the next tag, and — when a matching end
tag exists (`[if equip]` … `[/if equip]`) — the child sections in between. `tokens()` lays the tree back out
as the identical token list, so an untouched document prints to the text it was read from (tested), and a
changed one differs only where the script changed it.

Values keep their token type exactly (docs/pvf-script-text.md): an int stays an int, a float stays a float32
(`8000.0`), a string link `<id::key>` is never flattened to a plain string. JSON forms exchanged with the
script (see `api.d.ts`): int → number, string → string, float → `{type: "float", value}`, link →
`{type: "link", id, key, text}`, typed → `{type: "typed", code, value}`, word → `{type: "word", value}`.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.script.text import (
    INT32_MAX,
    INT32_MIN,
    Kind,
    Token,
    container_indexes,
    container_tags,
    float_token,
    int_token,
    is_link_key,
    is_section_text,
    is_word,
    link_token,
    print_tokens,
    section_token,
    string_token,
    typed_token,
    values_block,
    word_token,
)

_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")


def _bad(message: str, hint: str | None = None) -> BridgeError:
    return BridgeError(ErrorCode.INVALID_ARGUMENT, message, hint)


# --------------------------------------------------------------------------------------------- values


def float_value(bits: int) -> float:
    value = _F32.unpack(_U32.pack(bits & 0xFFFFFFFF))[0]
    return float(value)


def float_bits(value: float) -> int:
    if not math.isfinite(value):
        raise _bad(f"{value} is not a finite number")
    try:
        packed = _F32.pack(value)
    except OverflowError:
        raise _bad(f"{value} does not fit a float32") from None
    return int(_U32.unpack(packed)[0])


def to_json(tok: Token) -> Any:
    """A value token as the script sees it (see the module docstring)."""
    k = tok.kind
    if k is Kind.INT:
        return tok.value
    if k is Kind.STRING:
        return tok.value
    if k is Kind.FLOAT:
        return {"type": "float", "value": float_value(int(tok.value))}
    if k is Kind.LINK:
        return {"type": "link", "id": tok.link_id, "key": tok.value, "text": tok.link_text}
    if k is Kind.TYPED:
        return {"type": "typed", "code": tok.code, "value": tok.value}
    if k is Kind.WORD:
        return {"type": "word", "value": tok.value}
    return {"type": "section", "value": tok.value}


def plain(tok: Token) -> Any:
    """`getValue`: the primitive — numbers as numbers, strings and links as their text."""
    if tok.kind is Kind.FLOAT:
        return float_value(int(tok.value))
    if tok.kind is Kind.LINK:
        return tok.link_text
    return tok.value


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or float(value) != int(value):
        raise _bad(f"{value!r} is not an integer", "Pass {type: 'float', value} to write a float.")
    n = int(value)
    if not INT32_MIN <= n <= INT32_MAX:
        raise _bad(f"{n} does not fit a signed 32-bit int")
    return n


def from_json(value: Any, old: Token | None = None) -> Token:
    """A script value → token. A bare number takes the slot's type (int stays int, float stays float); a
    bare string over a string link is refused (links are never flattened silently)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        # NaN, ±Infinity and undefined reach the host as JSON null: name what the script wrote, not Python's None
        raise _bad(
            "null, undefined, NaN or Infinity is not a PVF value",
            "Use a finite number, a string or a typed value object (pvf_script_help topic 'types').",
        )
    if isinstance(value, bool):
        raise _bad(f"{str(value).lower()} is not a PVF value", "Use 1 or 0 for a flag, or a string.")
    if isinstance(value, int | float):
        if old is not None and old.kind is Kind.FLOAT:
            return float_token(float_bits(float(value)))
        if old is not None and old.kind is Kind.INT:
            if float(value) != int(value):
                raise _bad(
                    f"{value} is not an integer and this value is an int",
                    "Keep ints integral, or pass {type: 'float', value} to change the type on purpose.",
                )
            return int_token(_int(value))
        return int_token(_int(value)) if float(value) == int(value) else float_token(float_bits(float(value)))
    if isinstance(value, str):
        if old is not None and old.kind is Kind.LINK:
            raise _bad(
                "this value is a string link; a plain string would flatten it",
                "Edit the linked .str entry instead, pass {type: 'link', id, key}, or use setStrValue to "
                "replace the link by a plain string on purpose.",
            )
        return string_token(value)
    if isinstance(value, dict):
        kind = value.get("type")
        v = value.get("value")
        if kind == "int":
            return int_token(_int(v))
        if kind == "float":
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise _bad("a float value needs a numeric value")
            return float_token(float_bits(float(v)))
        if kind in ("string", "quoted"):
            if not isinstance(v, str):
                raise _bad("a string value needs a string value")
            return string_token(v)
        if kind == "link":
            lid, key = value.get("id"), value.get("key")
            if isinstance(lid, bool) or not isinstance(lid, int) or not 0 <= lid <= INT32_MAX:
                raise _bad("a link needs an integer id (the n_string.lst table)")
            if not isinstance(key, str) or not is_link_key(key):
                raise _bad(f"{key!r} is not a link key")
            return link_token(lid, key, str(value.get("text") or ""))
        if kind == "typed" or (isinstance(kind, str) and kind.startswith("block") and kind[5:].isdigit()):
            code = value.get("code") if kind == "typed" else int(kind[5:])
            if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= 255:
                raise _bad("a typed value needs a code from 0 to 255")
            if isinstance(v, str):
                return typed_token(code, v)
            return typed_token(code, _int(v))
        if kind == "word":
            if not isinstance(v, str) or not is_word(v):
                raise _bad(f"{v!r} is not a bare word")
            return word_token(v)
        raise _bad(f"unknown value type {kind!r}", "pvf_script_help topic 'types' lists the value types.")
    raise _bad(f"{type(value).__name__} is not a PVF value")


# --------------------------------------------------------------------------------------------- the tree


Decode = Callable[[int, int], list[Token]]
"""`decode(start, stop)` → the tokens of records `start:stop` of a stored script (a lazy document's values)."""


class Section:
    """A tag, its values, its children (when it has an end tag) and the values after its end tag.

    `values` and `after_end` of a lazily read document are record ranges of the stored file, decoded the
    first time they are read (`LazyDocument`); afterwards they are plain token lists like any other."""

    __slots__ = (
        "_after_end",
        "_lazy",
        "_values",
        "children",
        "end_tag",
        "has_end",
        "name",
        "parent",
        "raw_tag",
    )

    def __init__(
        self,
        name: str,
        values: list[Token] | None = None,
        children: list[Section] | None = None,
        has_end: bool = False,
        after_end: list[Token] | None = None,
        parent: Section | None = None,
        end_tag: str = "",
    ) -> None:
        self.name = name
        self._values: list[Token] = [] if values is None else values
        self.children: list[Section] = [] if children is None else children
        self.has_end = has_end
        self._after_end: list[Token] = [] if after_end is None else after_end
        """Values that follow the end tag (before the next tag); kept so the layout round-trips."""
        self.parent = parent
        self.end_tag = end_tag
        self._lazy: list[Any] | None = None
        """[decode, (start, stop) of the values or None, (start, stop) of the after-end values or None]."""

    @property
    def values(self) -> list[Token]:
        lazy = self._lazy
        if lazy is not None and lazy[1] is not None:
            self._values = lazy[0](*lazy[1]) + self._values
            lazy[1] = None
        return self._values

    @values.setter
    def values(self, tokens: list[Token]) -> None:
        if self._lazy is not None:
            self._lazy[1] = None
        self._values = tokens

    @property
    def after_end(self) -> list[Token]:
        lazy = self._lazy
        if lazy is not None and lazy[2] is not None:
            self._after_end = lazy[0](*lazy[2]) + self._after_end
            lazy[2] = None
        return self._after_end

    def tag(self) -> str:
        return f"[{self.name}]"

    def path(self) -> str:
        parts = []
        node: Section | None = self
        while node is not None and node.parent is not None:
            parts.append(node.name)
            node = node.parent
        return "/".join(reversed(parts))


class Document:
    """One parsed script; see the module docstring."""

    def __init__(self, tokens: list[Token], *, header: str | None, record_width: int | None) -> None:
        self._init(header, record_width)
        tags = [(i, tok) for i, tok in enumerate(tokens) if tok.kind is Kind.SECTION]
        self._build(tags, len(tokens), lambda a, b: tokens[a:b])

    def _init(self, header: str | None, record_width: int | None) -> None:
        self.header = header
        self.record_width = record_width
        self.root = Section("")
        self.warnings: list[str] = []
        self._source_tokens: list[Token] | None = None
        self._source: Callable[[], list[Token]] | None = None

    @property
    def source_tokens(self) -> list[Token] | None:
        """The tokens of the file as stored (its text for the diff), when it was read from the archive."""
        if self._source_tokens is None and self._source is not None:
            self._source_tokens = self._source()
            self._source = None
        return self._source_tokens

    def release(self) -> None:
        """The document is dropped (evicted by the worker): break what would keep it alive until a
        collection — each section points at its parent and the parent at it."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            node.parent = None
            kids = _CHILDREN.__get__(node)  # the slot itself (a pending root's property would build it)
            if kids:
                stack.extend(kids)
                _CHILDREN.__set__(node, [])

    @source_tokens.setter
    def source_tokens(self, tokens: list[Token] | None) -> None:
        self._source_tokens = tokens
        self._source = None

    def _build(self, tags: list[tuple[int, Token]], n: int, decode: Decode) -> None:
        matched = container_indexes([tok for _, tok in tags])  # indexes into `tags`

        def put(node: Section, after: bool, a: int, b: int) -> None:
            # The values between two tags go to one section (its values, or those after its end tag).
            if a < b:
                (node._after_end if after else node._values).extend(decode(a, b))

        stack = [self.root]
        target, after = self.root, False
        prev = 0
        for k, (i, tok) in enumerate(tags):
            put(target, after, prev, i)
            prev = i + 1
            tag = str(tok.value)
            if tag.startswith("[/") and k in matched:
                name = "[" + tag[2:]
                while len(stack) > 1:
                    node = stack.pop()
                    if node.tag() == name:
                        node.end_tag = tag
                        target, after = node, True
                        break
                continue
            if tag.startswith("[/") or not tag.startswith("[") or not tag.endswith("]"):
                # An unmatched end tag or an odd tag: a section of its own name, so nothing is lost.
                node = Section(tag[1:-1] if tag.startswith("[") and tag.endswith("]") else tag)
                node.end_tag = ""
                node.parent = stack[-1]
                node.raw_tag = tag
                stack[-1].children.append(node)
                target, after = node, False
                continue
            node = Section(tag[1:-1], has_end=k in matched, parent=stack[-1])
            stack[-1].children.append(node)
            target, after = node, False
            if node.has_end:
                stack.append(node)
        put(target, after, prev, n)

    # -------------------------------------------------------------------------------------------- output

    def tokens(self) -> list[Token]:
        out: list[Token] = list(self.root.values)
        for c in self.root.children:
            _emit(c, out)
        return out

    def text(self) -> str:
        return print_tokens(self.tokens(), header=self.header, record_width=self.record_width)

    # -------------------------------------------------------------------------------------------- lookup

    def find(self, path: str) -> list[Section]:
        parts = [p for p in str(path).strip("/").split("/") if p]
        if not parts:
            raise _bad("a section path is empty", "Name the section without brackets, e.g. 'price'.")
        level = [self.root]
        for depth, part in enumerate(parts):
            want = part.strip("[]").lower()
            nxt = []
            for node in level:
                nxt.extend(c for c in node.children if c.name.lower() == want)
            level = nxt
            if not level and depth < len(parts) - 1:
                return []
        return level

    def section(self, path: str, occurrence: int | None, *, touch: bool = False) -> Section | None:
        found = self.find(path)
        if occurrence is None:
            if touch and len(found) > 1:
                self.warn(f"[{path}] occurs {len(found)} times; the first was used (pass occurrence)")
            occurrence = 0
        if not isinstance(occurrence, int) or isinstance(occurrence, bool) or occurrence < 0:
            raise _bad("occurrence counts from 0")
        return found[occurrence] if occurrence < len(found) else None

    def warn(self, message: str) -> None:
        if message not in self.warnings and len(self.warnings) < 200:
            self.warnings.append(message)

    def create(self, path: str, end_tag: bool) -> Section:
        parts = [p.strip("[]") for p in str(path).strip("/").split("/") if p]
        parent = self.root
        for part in parts[:-1]:
            hit = [c for c in parent.children if c.name.lower() == part.lower()]
            if hit:
                parent = hit[0]
            else:
                node = Section(part, has_end=True, parent=parent)
                parent.children.append(node)
                parent = node
        return append_section(parent, parts[-1], [], end_tag)


class _PendingRoot(Section):
    """The root of a `LazyDocument` whose tree is not built yet: reading its children or values builds it."""

    __slots__ = ("_doc",)

    @property  # type: ignore[override]
    def children(self) -> list[Section]:
        doc = self._doc
        if doc is not None:
            self._doc = None
            doc._build_tree()
        return _CHILDREN.__get__(self)

    @children.setter
    def children(self, nodes: list[Section]) -> None:
        _CHILDREN.__set__(self, nodes)

    @property  # type: ignore[override]
    def values(self) -> list[Token]:
        _ = self.children
        return _VALUES.fget(self)  # type: ignore[misc]

    @values.setter
    def values(self, tokens: list[Token]) -> None:
        _ = self.children
        _VALUES.fset(self, tokens)  # type: ignore[misc]


_CHILDREN = Section.__dict__["children"]
_VALUES = Section.__dict__["values"]


class TagShape:
    """What `LazyDocument.find` needs of a file's tags, from the tags alone: `infos` (the `tag_info` of each
    tag), `keep` (the indexes among the file's tag-typed records that are tags) and — worked out only for a
    file with end tags — which tags nest (`matched`, `container_tags`) and the spans they enclose."""

    __slots__ = ("_spans", "infos", "keep", "matched")

    def __init__(self, keep: list[int], infos: list[TagInfo]) -> None:
        self.keep = keep
        self.infos = infos
        self._spans: list[tuple[int, int]] | None = None
        self.matched: set[int] = set()

    def _nesting(self) -> list[tuple[int, int]]:
        """Spans (a, b) of the tags `Document._build` has open between tags a and b. Only tags whose text
        some end tag of the file closes can be matched, so `container_tags` runs over those alone (a tag
        nothing closes only ever leaves the stack with the ones above it: the same pairs); then the walk of
        `_build` over the matched ones: an end tag closes the open tags down to its own, and a tag is at the
        top level exactly when no span encloses it."""
        spans = self._spans
        if spans is None:
            infos = self.infos
            closes = {"[" + info[2][2:] for info in infos if info[0] == 1}
            spans = []
            if closes:
                at = [k for k, info in enumerate(infos) if info[0] == 1 or info[2] in closes]
                found = container_tags([infos[k][2] for k in at])
                self.matched = {at[j] for j in found}
                stack: list[int] = []
                for j in sorted(found):
                    k = at[j]
                    kind, _name, tag, _low = infos[k]
                    if kind == 1:
                        close = "[" + tag[2:]
                        while stack:
                            a = stack.pop()
                            spans.append((a, k))
                            if infos[a][2] == close:
                                break
                    elif kind == 0:
                        stack.append(k)
                spans.extend((a, len(infos)) for a in stack)
            self._spans = spans
        return spans

    def top_hits(self, want: str) -> tuple[int, ...] | None:
        """The indexes of the top-level tags named `want` (lower case), or None where one of them has an end
        tag (it holds children: the tree is needed)."""
        infos = self.infos
        hits = [k for k, info in enumerate(infos) if info[3] == want]
        if not hits:
            return ()
        if self._spans is None:
            # Every span `_nesting` finds opens at a tag of kind 0 whose text some end tag closes: a hit before
            # the first such tag is enclosed by none and matched by nothing (unless it is an end tag), so it is
            # a top-level section — the usual `[price]` ahead of any `[if equip]`, without the walk.
            closes = {"[" + info[2][2:] for info in infos if info[0] == 1}
            first = next(
                (j for j, info in enumerate(infos) if info[0] == 0 and info[2] in closes), len(infos)
            )
            if hits[-1] < first and all(infos[k][0] != 1 for k in hits):
                return tuple(hits)
        spans = self._nesting()
        matched = self.matched
        if not matched:
            return tuple(hits)
        out = []
        for k in hits:
            if k in matched and infos[k][0] == 1:
                continue  # an end tag that closes a section is no section
            if any(a < k < b for a, b in spans):
                continue
            if k in matched:
                return None
            out.append(k)
        return tuple(out)


class LazyDocument(Document):
    """A document read from a stored file's records without decoding them. A subclass gives `_shape()`
    (the `TagShape` of its tags and the record position of each), `_n` (the record count), `_decode(a, b)`
    (the tokens of records `a:b`), `_has_tag(name)` and `_source` (all the tokens).

    The tree is the one `Document(tokens)` builds (the same walk over the same tags), built when first
    needed; each section's values are decoded when first read. `find` of a one-part path answers from the
    tags alone while the tree is not built: a file without the tag answers `[]` having decoded nothing, and
    a top-level section without an end tag is made on its own (the tree built later takes that very
    object). So a script that reads `[price]` of 80,000 files decodes the `[price]` records only. A subclass
    whose tokens of a run depend on the records before it (nkpi prints a string that occurred earlier in the
    file at another offset raw) keeps that rule in `_shape` and `_decode` (`lazy_nkpi.NkpiDocument`)."""

    _n: int
    _shape_of: TagShape | None
    _tag_list: list[tuple[int, TagInfo]] | None
    _made: dict[int, Section]
    _tagged: str | None = None
    """A name `_has_tag` answered True for (`lacks`)."""

    def _init_lazy(self, header: str | None, record_width: int | None, n: int, data: bytes) -> None:
        """`Document._init` without the root it would make: the root is a pending one, built on first use.
        A subclass calls this first, then sets what its `_decode` reads."""
        self.header = header
        self.record_width = record_width
        self.warnings: list[str] = []
        self._source_tokens = None
        self._source = self._all_tokens  # type: ignore[attr-defined]  # every subclass defines it
        self._tag_list = None
        self._shape_of = None
        self._positions: list[int] | None = None
        self._n = n
        self._matched = None
        self._made = {}
        self._data = data
        root = _PendingRoot("")
        root._doc = self
        self.root = root

    def _shape(self) -> tuple[TagShape, list[int]]:
        raise NotImplementedError

    def _decode(self, a: int, b: int) -> list[Token]:
        raise NotImplementedError

    def _has_tag(self, want: str) -> bool:
        """False only when no tag record of the file reads `[want]` (any case) — so `find` of a name the
        file lacks answers without scanning its tags."""
        return True

    @property
    def _tags(self) -> list[tuple[int, TagInfo]]:
        tags = self._tag_list
        if tags is None:
            shape, positions = self._shape()
            tags = self._tag_list = list(zip(positions, shape.infos, strict=True))
        return tags

    def release(self) -> None:
        # The root and the document point at each other until the tree is built, sections `find` made
        # point at the root, and `_source` is a method of the document: drop those links so reference
        # counting frees an unread file at once (a cycle would wait for a full collection, which scans
        # every live object: ≈ 1.4 s of a classic-200k price raise).
        self._source = None
        root = self.root
        if isinstance(root, _PendingRoot) and root._doc is not None:
            root._doc = None
            self._made = {}
        else:
            super().release()

    def _containers(self) -> set[int]:
        shape = self._shape()[0]
        shape._nesting()
        return shape.matched

    def find(self, path: str) -> list[Section]:
        root = self.root
        if isinstance(root, _PendingRoot) and root._doc is not None:
            want = one_part(path)
            if want is not None:
                found = self._find_top(want)
                if found is not None:
                    return found
        return super().find(path)

    def lacks(self, path: str) -> bool:
        """True when `find(path)` is `[]` from the prefilter alone: the tree is not built and `path` is one
        name that no tag record of the file reads (`_has_tag`). Only a change of the document itself can
        then add such a section (a new top-level one)."""
        root = self.root
        if not isinstance(root, _PendingRoot) or root._doc is None or self._shape_of is not None:
            return False
        want = one_part(path)
        if want is None:
            return False
        if self._has_tag(want):
            self._tagged = want  # so `find(path)` does not look again
            return False
        return True

    def _find_top(self, want: str) -> list[Section] | None:
        """The top-level sections named `want` from the tags alone, or None where that needs the tree (one
        of them has an end tag, so it holds children)."""
        if self._shape_of is None and self._tagged != want and not self._has_tag(want):
            return []
        shape, positions = self._shape()
        hits = shape.top_hits(want)
        if not hits:
            return None if hits is None else []
        out = []
        made = self._made
        last = len(positions) - 1
        for k in hits:
            node = made.get(k)
            if node is None:
                kind, name, tag, _low = shape.infos[k]
                node = Section(name, None, None, False, None, self.root)
                if kind:
                    node.raw_tag = tag
                a = positions[k] + 1
                b = positions[k + 1] if k < last else self._n
                if a < b:
                    node._lazy = [self._decode, (a, b), None]
                made[k] = node
            out.append(node)
        return out

    def tokens(self) -> list[Token]:
        """All tokens; while the tree is not built, without building it. Then only the sections `find` made
        (top-level, no end tag, no children) can differ from the stored records, and only in their values
        (anything else builds the tree first), so the file is the stored records in a few long runs with
        those sections' values in between: a written file of a price-raise costs ≈ 3 decodes, not one per
        section plus the tree."""
        root = self.root
        if not isinstance(root, _PendingRoot) or root._doc is None:
            return super().tokens()
        decode, tags, n = self._decode, self._tags, self._n
        out: list[Token] = []
        prev = 0
        for k in sorted(self._made):
            node = self._made[k]
            lazy = node._lazy
            if lazy is not None and lazy[1] is not None:
                continue  # its values were never read: still the stored records
            p = tags[k][0] + 1
            if p > prev:
                out.extend(decode(prev, p))  # up to and with the section's own tag record
            out.extend(node._values)
            prev = tags[k + 1][0] if k + 1 < len(tags) else n
        if n > prev:
            out.extend(decode(prev, n))
        return out

    def text(self) -> str:
        """`print_tokens(self.tokens(), …)`; while the tree is not built (and without `record_width`), laid
        out from the tags alone, each run of values between two tags printed on its own (`_run_text`): the
        stored runs without making their tokens, the sections `find` made and changed from their tokens. A
        written file of a price-raise costs its runs' texts, not a decode and a print of every token."""
        root = self.root
        if self.record_width is not None or not isinstance(root, _PendingRoot) or root._doc is None:
            return super().text()
        tags, n, made = self._tags, self._n, self._made
        matched = self._containers()
        run_text = self._run_text
        lines: list[str] = [self.header] if self.header is not None else []
        depth = indent = prev = 0
        last = len(tags) - 1
        for k, (p, info) in enumerate(tags):
            if p > prev:
                lines.append(run_text(prev, p, indent))
            kind, _name, tag, _low = info
            contains = k in matched
            closes = contains and kind == 1  # `tag_info`: kind 1 is a tag that starts with `[/`
            if closes:
                depth -= 1
            if depth == 0 and lines:
                lines.append("")
            lines.append("\t" * depth + tag)
            if contains and not closes:
                depth += 1
                indent = depth
            else:
                indent = depth if closes else depth + 1
            prev = p + 1
            node = made.get(k)
            if node is not None:
                lazy = node._lazy
                if lazy is None or lazy[1] is None:  # its values were read (maybe changed): print its tokens
                    if node._values:
                        lines.append(values_block(node._values, indent))
                    prev = tags[k + 1][0] if k < last else n
        if n > prev:
            lines.append(run_text(prev, n, indent))
        return "\n".join(lines) + "\n"

    def _run_text(self, a: int, b: int, indent: int) -> str:
        """`values_block` of the tokens of records `a:b` (values between two tags, `a < b`)."""
        return values_block(self._decode(a, b), indent)

    def _build_tree(self) -> None:
        """`_build(…, lazy=True)` with each tag's reading decided once per tag text (`tag_info`) and the
        sections `find` already made taken as they are (their values may have been read or changed)."""
        tags, n, decode, made = self._tags, self._n, self._decode, self._made
        matched = self._containers()
        root = self.root
        stack: list[Section] = [root]
        top = root
        target: Section | None = root
        after = False
        prev = 0
        for k, (i, info) in enumerate(tags):
            if i > prev and target is not None:
                if after:
                    if target._lazy is None:
                        target._lazy = [decode, None, None]
                    target._lazy[2] = (prev, i)
                else:
                    target._lazy = [decode, (prev, i), None]
            prev = i + 1
            kind, name, tag, _low = info
            if kind == 1 and k in matched:
                close = "[" + tag[2:]
                while len(stack) > 1:
                    node = stack.pop()
                    if node.tag() == close:
                        node.end_tag = tag
                        target, after = node, True
                        break
                top = stack[-1]
                continue
            node = made.get(k)
            if node is not None:  # made by `find`: a top-level section without an end tag, values its own
                top.children.append(node)
                target = None
                continue
            if kind:
                node = Section(name, None, None, False, None, top)
                node.raw_tag = tag
                top.children.append(node)
                target, after = node, False
                continue
            node = Section(name, None, None, k in matched, None, top)
            top.children.append(node)
            target, after = node, False
            if node.has_end:
                stack.append(node)
                top = node
        if n > prev and target is not None:
            if after:
                if target._lazy is None:
                    target._lazy = [decode, None, None]
                target._lazy[2] = (prev, n)
            else:
                target._lazy = [decode, (prev, n), None]
        self._made = {}


TagInfo = tuple[int, str, str, str]
_TAG_INFOS: dict[str, TagInfo] = {}
_ONE_PART: dict[str, str | None] = {}
"""A `find` path → its one part in lower case without brackets, or None where it has more than one part."""
_NO_PART = object()


def at_a_record(data: bytes, patterns: Iterable[bytes], first: int) -> bool:
    """Whether any of `patterns` occurs in `data` where a 5-byte record starts (records from offset `first`),
    not in bytes straddling two records — the tag prefilter of a lazy document of either family."""
    for pat in patterns:
        at = data.find(pat, first)
        while at >= 0:
            if (at - first) % 5 == 0:
                return True
            at = data.find(pat, at + 1)
    return False


def one_part(path: str) -> str | None:
    """The one part of a `find` path in lower case without brackets, or None where it has more than one."""
    want = _ONE_PART.get(path, _NO_PART)
    if want is _NO_PART:
        parts = [p for p in str(path).strip("/").split("/") if p]
        want = parts[0].strip("[]").lower() if len(parts) == 1 else None
        if len(_ONE_PART) < 4096 and isinstance(path, str):
            _ONE_PART[path] = want
    return want  # type: ignore[return-value]


def tag_info(tag: str) -> TagInfo:
    """(0 a tag that may open a section | 1 an end tag | 2 an odd tag, the section's name, the tag, the name
    in lower case): how `Document._build` and `find` read a tag, decided once per tag text."""
    info = _TAG_INFOS.get(tag)
    if info is None:
        bracketed = tag.startswith("[") and tag.endswith("]")
        if tag.startswith("[/"):
            name = tag[1:-1] if bracketed else tag
            info = (1, name, tag, name.lower())
        elif not bracketed:
            info = (2, tag, tag, tag.lower())
        else:
            info = (0, tag[1:-1], tag, tag[1:-1].lower())
        if len(_TAG_INFOS) > 1 << 16:
            _TAG_INFOS.clear()
        _TAG_INFOS[tag] = info
    return info


def _values_text(tag: Token, values: list[Token], width: int | None) -> str:
    """The lines `print_tokens` gives the values of a top-level section without an end tag (those after its
    tag line)."""
    if not values:
        return ""
    return print_tokens([tag, *values], record_width=width).split("\n", 1)[1]


def _emit(node: Section, out: list[Token]) -> None:
    raw = getattr(node, "raw_tag", None)
    if raw is not None:
        out.append(section_token(raw))
        out.extend(node.values)
        return
    out.append(section_token(node.tag()))
    out.extend(node.values)
    for c in node.children:
        _emit(c, out)
    if node.has_end:
        out.append(section_token(node.end_tag or f"[/{node.name}]"))
        out.extend(node.after_end)


def append_section(parent: Section, name: str, values: list[Token], end_tag: bool) -> Section:
    name = str(name).strip()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if not name or name.startswith("/") or not is_section_text(f"[{name}]"):
        raise _bad(f"{name!r} is not a section name")
    if parent.parent is not None and not parent.has_end:
        raise _bad(
            f"[{parent.name}] has no end tag, so it cannot hold sections",
            "Append to the document, or to a section with an end tag.",
        )
    node = Section(name, values=list(values), has_end=bool(end_tag), parent=parent)
    parent.children.append(node)
    return node


def attached(sec: Section) -> bool:
    """Whether `sec` is still in its parent's children (not deleted). A section of a `LazyDocument` whose
    tree is not built yet is: removing one builds the tree first."""
    parent = sec.parent
    if parent is None:
        return False
    if isinstance(parent, _PendingRoot) and parent._doc is not None:
        return True
    return sec in parent.children


def walk(node: Section) -> Iterator[Section]:
    for c in node.children:
        yield c
        yield from walk(c)
