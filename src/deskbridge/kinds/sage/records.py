"""Extract the compact per-file records of one SAGE XML document: assets, defines, includes, references.

Facts (research/sage.md §2.1–2.8): the root is `<AssetDeclaration xmlns="uri:ea.com:eala:asset">`; BAB reads
only `Includes`, `Defines` and `Tags` specially and every other root child is an asset that must carry
an `id`; `xi:include` may sit at the root (with the `xpointer(/n:X/child::*)` form) or inside an asset;
`inheritFrom` is `Id` or `Type:Id`; values starting with `$` or `=` are define macros / expressions and
`Poid` ids are pipeline-local, so neither is a reference. Real files are sometimes malformed; lxml's
recovering parser keeps what it can and every error becomes a `parse-error` diagnostic.
"""

from __future__ import annotations

import _thread
import codecs
import io
import marshal
import operator
import re
import sys

from deskbridge.kinds.sage._lxml import etree
from deskbridge.kinds.sage._record import Record
from deskbridge.kinds.sage.schema import SchemaModel

TYPE_CHECKING = False  # `typing` is not loaded by a warm start
if TYPE_CHECKING:
    from typing import Any

NS = "{uri:ea.com:eala:asset}"
XAI_JOIN = "{uri:ea.com:eala:asset:instance}joinAction"
XI_INCLUDE = "{http://www.w3.org/2001/XInclude}include"
SPECIAL_ROOT_CHILDREN = frozenset({"Includes", "Defines", "Tags"})
INCLUDE_KINDS = frozenset({"all", "instance", "reference"})
JOIN_ACTIONS = frozenset({"append", "overwrite", "override", "replace", "remove"})
"""`xai:joinAction` values BAB accepts, case-insensitively (research/sage.md §2.6 NodeJoiner.cs)."""

RECORD_CODES = frozenset(
    {"parse-error", "missing-id", "include-outside-includes", "duplicate-instance", "invalid-join-action"}
)
"""Diagnostics that come from one file's own records (the others come from walking the include graph)."""

FILE_MAX_BYTES = 64 * 1024 * 1024
"""Files larger than this are not read (the largest real `.w3x` seen is 22.8 MB)."""
PARSE_ERRORS_MAX = 20
"""Parse errors kept per file; the rest are counted in the last message."""

_JOINED_XPATH: Any = None


def _JOINED(root: Any) -> Any:
    """Every element carrying `xai:joinAction`, in document order (the compiled XPath is built on first use).

    Selected through the attribute (`//@xai:joinAction/..`), not as `//*[@xai:joinAction]`: libxml2 then
    visits the attributes in C instead of evaluating a predicate per element, ~3.5x fewer instructions
    (88 -> 25 M on the 207 RA3Afterdash files that mention joinAction; the same 473 elements)."""
    global _JOINED_XPATH
    if _JOINED_XPATH is None:
        _JOINED_XPATH = etree.XPath(
            "//@xai:joinAction/..", namespaces={"xai": "uri:ea.com:eala:asset:instance"}
        )
    return _JOINED_XPATH(root)


_BRACKET_INDEX = re.compile(r"\\?\[[0-9]+\]$")

# Reference tuple fields, kept positional for compactness (35 k of them on the benchmark data).
R_ASSET, R_TYPE, R_VALUE, R_LINE, R_COL, R_END, R_KIND, R_ELEMENT, R_PARENT, R_ATTR = range(10)
_BY_POSITION = operator.itemgetter(R_LINE, R_COL)
Ref = tuple[int, str, str, int, int, int, str, str, str, str]
"""(asset index in the file, target type, target id, line, column, end column, kind, element, parent,
attribute) — kind is `attribute`, `content` or `inheritFrom`; columns are 1-based, end exclusive."""


class FileRecords(Record):
    """What one file contributes to the index; small, and cached per file."""

    _fields = (
        "root",
        "assets",
        "defines",
        "includes",
        "xincludes",
        "ref_data",
        "joins",
        "diagnostics",
        "shallow",
        "spliceable",
        "root_has_id",
        "last_good",
        "ref_total",
        "located",
    )
    __slots__ = (*(f for f in _fields if f != "assets"), "asset_data", "asset_total", "source")

    def __init__(
        self,
        root: str = "",
        assets: list[tuple[str, str, int]] | bytes | None = None,
        defines: list[tuple[str, str, int, bool]] | None = None,
        includes: list[tuple[str, str, int]] | None = None,
        xincludes: list[tuple[str, str, int, bool]] | None = None,
        ref_data: Any = None,
        joins: list[tuple[str, str, int]] | None = None,
        diagnostics: list[tuple[str, str, int, str]] | None = None,
        shallow: bool = False,
        spliceable: list[tuple[str, str, int]] | None = None,
        root_has_id: bool = False,
        last_good: bool = False,
        ref_total: int = 0,
        asset_total: int = 0,
        located: bool = True,
        source: Any = None,
    ) -> None:
        self.root = root
        """Local name of the root element ('' when nothing parsed); fragments have a root other than
        AssetDeclaration."""
        self.asset_data: Any = [] if assets is None else assets
        """(type, id, line) of every top-level asset (`assets`) — for records read from the cache, their
        marshalled bytes until first use: a warm start counts assets, it does not list them until a query
        needs the definition tables (17 k tuples were a third of the cache's load time)."""
        self.asset_total = asset_total
        """How many assets `asset_data` holds while it is still marshalled."""
        self.defines = [] if defines is None else defines
        """(name, value, line, override)."""
        self.includes = [] if includes is None else includes
        """(kind as written, lower-cased; source; line) of `<Includes><Include/>`."""
        self.xincludes = [] if xincludes is None else xincludes
        """(href, xpointer, line, nested) of every `xi:include`; nested = inside an asset, not at the root."""
        self.ref_data: Any = [] if ref_data is None else ref_data
        """The reference rows (`refs`) — for records read from the cache, their marshalled bytes until first
        use: a warm start walks includes and assets only, and most of the cache is references."""
        self.joins = [] if joins is None else joins
        """(element, joinAction value, line) of every `xai:joinAction`."""
        self.diagnostics = [] if diagnostics is None else diagnostics
        """(code, severity, line, message)."""
        self.shallow = shallow
        """True for art files, where only top-level records were read."""
        self.spliceable = [] if spliceable is None else spliceable
        """Fragments only: (type, id, line) of the root element (first, when it has an id) and of each child
        with an id — what a root-level `xi:include` splices in as top-level assets."""
        self.root_has_id = root_has_id
        self.last_good = last_good
        """True when the file no longer parses and these are the records of its last version that did
        (issue 12: a broken save must not empty the index); its `parse-error` diagnostics describe the
        current text."""
        self.ref_total = ref_total
        """How many reference rows `ref_data` holds while it is still marshalled."""
        self.located = located
        """False while the reference rows are not located yet (`UNLOCATED` rows, as a cold build's workers
        write them): `refs` finds their lines and columns in the file's text on first read."""
        self.source = source
        """Gives the file's bytes as they were parsed (None when the file changed since) for locating the
        rows; set by the record store, not cached."""

    @property
    def assets(self) -> list[tuple[str, str, int]]:
        data = self.asset_data
        if type(data) is bytes:
            data = self.asset_data = marshal.loads(data)
        return data  # type: ignore[no-any-return]

    @assets.setter
    def assets(self, value: list[tuple[str, str, int]]) -> None:
        self.asset_data = value

    @property
    def asset_count(self) -> int:
        data = self.asset_data
        return self.asset_total if type(data) is bytes else len(data)

    @property
    def refs(self) -> list[Ref]:
        data = self.ref_data
        if type(data) is bytes:
            data = self.ref_data = marshal.loads(data)
        if not self.located:
            source = self.source
            text = source() if source is not None else None
            data = self.ref_data = locate_refs(data, text)
            self.located = True
        return data  # type: ignore[no-any-return]

    @property
    def raw_refs(self) -> list[Any]:
        """The reference rows, located or not: what reads only their asset, type, id, kind, element, parent
        and attribute (the fields both forms share) needs no file read."""
        data = self.ref_data
        if type(data) is bytes:
            data = self.ref_data = marshal.loads(data)
        return data  # type: ignore[no-any-return]

    @property
    def ref_count(self) -> int:
        data = self.ref_data
        return self.ref_total if type(data) is bytes else len(data)

    def to_cache(self) -> tuple[list[Any], bytes]:
        """(head, marshalled reference rows) for the records cache."""
        data = self.ref_data
        blob = data if type(data) is bytes else marshal.dumps(data)
        assets = self.asset_data
        head = [
            self.root,
            assets if type(assets) is bytes else marshal.dumps(assets),
            self.defines,
            self.includes,
            self.xincludes,
            self.joins,
            self.diagnostics,
            self.shallow,
            self.spliceable,
            self.root_has_id,
            self.last_good,
            self.ref_count,
            self.asset_count,
            self.located,
        ]
        return head, blob

    @classmethod
    def from_cache(cls, head: list[Any], blob: bytes) -> FileRecords:
        return cls(
            root=head[0],
            assets=head[1],
            defines=head[2],
            includes=head[3],
            xincludes=head[4],
            ref_data=blob,
            joins=head[5],
            diagnostics=head[6],
            shallow=head[7],
            spliceable=head[8],
            root_has_id=head[9],
            last_good=head[10],
            ref_total=head[11],
            asset_total=head[12],
            located=head[13],
        )

    def parse_failed(self) -> bool:
        return any(d[0] == "parse-error" for d in self.diagnostics)


_PARSERS: dict[tuple[int, bool], etree.XMLParser] = {}
"""One parser per thread and kind (an lxml parser must not parse in two threads at once), made once, not per
file; each parse starts a fresh `error_log`."""

BLANKS_DROPPED_BELOW_LINES = 60_000
"""Texts with fewer lines than this are parsed without their blank text nodes (`xml_parser(blank=False)`).
libxml2 keeps an element's line in 16 bits; past line 65,535 it finds the line in the text node after the
element, so a longer text keeps them (KW's FXParticleSystem.xml, 80,000+ lines). Below that the records
are the same either way — no record reads a whitespace-only text or any tail — and the parse makes ~20 %
fewer nodes: 1,301 -> 1,225 M instructions and 25.0 k -> 20.0 k page faults parsing RA3Afterdash's files."""


BLANKS_COUNTED_FROM_BYTES = 2 * 1024 * 1024
"""Texts this large have their newlines counted before the parse (KW's FXParticleSystem.xml: 2.4 MB, 84,789
lines): a smaller one reaching `BLANKS_DROPPED_BELOW_LINES` lines averages under 35 bytes a line (EA's
largest RA3 files: 27-32 bytes a line, under 27,000 lines), so its second parse stays rare."""


def _reaches(root: Any, lines: int) -> bool:
    """Whether the last node of a document parsed without blank text nodes is on line `lines` or later (or
    its line is not known): every element before it is on a line no later (libxml2 numbers them in
    document order), so below that the blank nodes change nothing."""
    last = root
    while len(last):
        last = last[-1]
    line = last.sourceline
    return line is None or line >= lines


def xml_parser(blank: bool = True) -> etree.XMLParser:
    """This thread's parser of mod XML (records, effective assets): recovering, no entities, DTDs or network;
    `blank=False` drops blank text nodes (only for texts of fewer than `BLANKS_DROPPED_BELOW_LINES` lines)."""
    key = (_thread.get_ident(), blank)
    parser = _PARSERS.get(key)
    if parser is None:
        parser = _PARSERS[key] = etree.XMLParser(
            recover=True,
            remove_comments=True,
            remove_pis=True,
            huge_tree=True,
            resolve_entities=False,
            no_network=True,
            load_dtd=False,
            # Nothing reads `xml:id`s: libxml2 then does not hash them.
            collect_ids=False,
            remove_blank_text=not blank,
        )
    return parser


_ASSET_NS_DECL = b'xmlns="uri:ea.com:eala:asset"'
_ASSET_NS_BLANK = b" " * len(_ASSET_NS_DECL)


def _without_asset_ns(data: bytes) -> bytes | bytearray:
    """`data` with its first default declaration of EA's asset namespace blanked out (same length: every
    line and column stays where it was). Every element then has its bare local name as its tag, which lxml
    builds on each `.tag` read without a `{uri:ea.com:eala:asset}` prefix to join onto it; the records
    use local names only, so they are the same (compared on all RA3Afterdash files). One copy, blanked in
    place (lxml parses any buffer), not the two that slicing and joining bytes make."""
    at = data.find(_ASSET_NS_DECL)
    if at < 0:
        return data
    out = bytearray(data)
    out[at : at + len(_ASSET_NS_DECL)] = _ASSET_NS_BLANK
    return out


_DECLARED_ENCODING = re.compile(rb"<\?xml[^>]*?\bencoding\s*=\s*[\"']([A-Za-z][A-Za-z0-9._-]*)[\"']")
"""The `encoding` of an XML declaration at the very start (XML 1.0 §4.3.3)."""


def _declared(data: bytes) -> str | None:
    """The codec of the encoding an XML declaration at the start names (None: no declaration, unknown)."""
    m = _DECLARED_ENCODING.match(data, 0, 200)
    if m is None:
        return None
    try:
        return codecs.lookup(m.group(1).decode("ascii")).name
    except LookupError:
        return None


def decode_text(data: bytes) -> str:
    """Text of an XML file for excerpts and columns, never failing: UTF-16 by BOM, else the encoding its
    XML declaration names (Windows-authored mods declare `windows-1252`, as libxml2 reads them), else UTF-8
    (BOM dropped)."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", errors="replace")
    name = _declared(data) if data[:3] != b"\xef\xbb\xbf" else None
    # A declaration readable as ASCII is never UTF-16/32 text (that comes with a BOM, handled above).
    if name and not name.startswith(("utf-16", "utf-32", "utf-8")):
        return data.decode(name, errors="replace")
    return data.decode("utf-8-sig", errors="replace")


_LOCAL: dict[Any, str] = {}
"""Qualified tag → local name; tags repeat endlessly, so each is split once."""


def _local(tag: Any) -> str:
    hit = _LOCAL.get(tag)
    if hit is None:
        hit = sys.intern(tag.rpartition("}")[2]) if isinstance(tag, str) else ""
        _LOCAL[tag] = hit
    return hit


_ATTR_PATTERNS: dict[str, re.Pattern[str]] = {}


def _attr_pattern(name: str) -> re.Pattern[str]:
    pat = _ATTR_PATTERNS.get(name)
    if pat is None:
        pat = _ATTR_PATTERNS[name] = re.compile(r"(?<![\w:.-])" + re.escape(name) + r"\s*=\s*([\"'])")
    return pat


_OPENERS: dict[str, bytes] = {}
"""Element name → b"<name", for `_Locator.start_line` on bytes."""
_NEEDLES: dict[str, str] = {}
"""Attribute name → "name=", for `_Locator.attribute` (made once, not per reference row)."""
_STR_OPENERS: dict[str, str] = {}
"""Element name → "<name", for `_Locator.attribute`."""
_ENDS = (b" ", b"\t", b"\r", b"/", b">")
"""What may follow `<name` in a start tag, as one-byte slices (`in` on a bytes object would also match b"")."""
_ENDS_NL = (*_ENDS, b"\n")
"""The same in the whole text, where a line's end is its "\n"."""
_PAST_THE_END = 1 << 62
"""A cursor's line once no opener is left after it."""


def _opener_line(lines: list[Any], line: int, needle: Any, ends: Any) -> int:
    """`_Locator.start_line` on the text split into lines (bytes or str): from `line` up, at most 200 lines."""
    n = len(needle)
    for ln in range(min(line, len(lines)) - 1, max(line - 200, 0) - 1, -1):
        text = lines[ln]
        pos = text.find(needle)
        while pos >= 0:
            after = text[pos + n : pos + n + 1]
            if not after or after in ends:
                return ln + 1
            pos = text.find(needle, pos + 1)
    return line


class _Locator:
    """Find the column range of a value on (or just after) an element's start line."""

    __slots__ = ("_blines", "_count", "_cursors", "_lines", "_scan", "data")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._lines: list[str] | None = None
        self._blines: list[bytes] | None = None
        self._cursors: dict[str, list[Any]] | None = None
        self._scan = 0
        """Where `opener_line` starts its next search: just after the last opener it answered."""
        self._count = [0, 1]
        """[that opener's offset, its line]: where `opener_line` counts newlines on from."""

    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = decode_text(self.data).split("\n")
        return self._lines

    def start_line(self, line: int, element: str) -> int:
        """The line where `<element` opens: libxml2 reports the line where the start tag *ends*. The answer
        is the last line at or before `line` (at most 199 lines up) holding `<element` followed by one of
        ` \t\r/>` or the line's end — in EA's files about half the start tags span several lines.

        Unless the text is UTF-16 the search runs on the bytes (UTF-8 decoding never adds or removes a
        "\n", and `<element` is found on the same lines either way), and without splitting them into lines:
        the records ask for the openers of one name in document order (assets, includes, defines), so each
        name keeps a cursor that goes forward through the occurrences of `<element`, counting newlines in
        between (`bytes.find` and `bytes.count` in C). Splitting every file into lines instead costs about
        the same instructions (within 3 % on RA3Afterdash) but makes a bytes object per line: ~16 % more
        page faults in a cold build's workers, which keep every tree. Asked out of order (the effective-asset
        builder), it searches the lines from `line` up instead — the same answer."""
        cursors = self._cursors
        if cursors is None:
            if self.data[:2] in (b"\xff\xfe", b"\xfe\xff"):
                return _opener_line(self.lines(), line, "<" + element, " \t\r/>")
            cursors = self._cursors = {}
        cur = cursors.get(element)
        if cur is None:
            needle = _OPENERS.get(element)
            if needle is None:
                needle = _OPENERS[element] = b"<" + element.encode()
            # [needle, offset the next search starts at, its line, last line with an opener, last question]
            cur = cursors[element] = [needle, 0, 1, 0, 0]
        needle, pos, pos_line, best, last = cur
        if line < last:
            lines = self._blines
            if lines is None:
                lines = self._blines = self.data.split(b"\n")
            return _opener_line(lines, line, needle, _ENDS)
        if pos_line <= line:
            data = self.data
            find, count = data.find, data.count
            n = len(needle)
            while True:
                at = find(needle, pos)
                if at < 0:
                    pos_line = _PAST_THE_END
                    break
                pos_line += count(b"\n", pos, at)
                pos = at
                if pos_line > line:
                    break
                after = data[at + n : at + n + 1]
                if not after or after in _ENDS_NL:
                    best = pos_line
                pos = at + 1
            cur[1] = pos
            cur[2] = pos_line
            cur[3] = best
        cur[4] = line
        return best if best and best > line - 200 else line

    def opener_line(self, line: int, element: str) -> int:
        """`start_line`'s answer for elements asked in document order, each after the end of the one before
        (the assets, includes and defines of `begin_records`), with one cursor for every name: the search
        starts just after the opener answered last, and the newlines are counted from there, so a file's
        bytes are searched and counted about once, not once per name.

        The answer is the same: `start_line` answers the last opener of `element` on a line up to `line`
        (if it is less than 200 lines up). The first opener found on `line` itself is answered at once (any
        later one up to `line` is on that line too); one found on a line before it is followed by a search
        to `line`'s end, in windows that grow until the newlines counted say they are past it. If the
        search finds no opener up to `line` (a prefixed tag, or a comment holding an opener after the last
        answer on its line), `start_line` answers."""
        data = self.data
        if self._cursors is None and data[:2] in (b"\xff\xfe", b"\xfe\xff"):
            return self.start_line(line, element)
        needle = _OPENERS.get(element)
        if needle is None:
            needle = _OPENERS[element] = b"<" + element.encode()
        find = data.find
        at = find(needle, self._scan)
        if at < 0:
            return self.start_line(line, element)
        counted = self._count
        count = data.count
        at_line = counted[1] + count(b"\n", counted[0], at)
        if at_line > line:
            return self.start_line(line, element)
        n = len(needle)
        after = data[at + n : at + n + 1]
        valid = not after or after in _ENDS_NL
        if valid and at_line == line:
            self._scan = at + 1
            counted[0] = at
            counted[1] = at_line
            return line
        best, best_at = (at_line, at) if valid else (0, 0)
        width = 1024
        while True:
            hi = at + 1 + width
            nxt = find(needle, at + 1, hi)
            if nxt < 0:
                if hi >= len(data):
                    break
                # No opener starts before hi - n + 1: look further only while that is still on `line`.
                edge = hi - n + 1
                if edge > at and at_line + count(b"\n", at, edge) > line:
                    break
                width *= 4
                continue
            at_line += count(b"\n", at, nxt)
            at = nxt
            if at_line > line:
                break
            after = data[at + n : at + n + 1]
            if not after or after in _ENDS_NL:
                best, best_at = at_line, at
        if not best:
            return self.start_line(line, element)
        self._scan = best_at + 1
        counted[0] = best_at
        counted[1] = best
        return best if best > line - 200 else line

    def attribute(self, line: int, element: str, name: str, value: str) -> tuple[int, int, int]:
        """Search backwards from the line where the start tag ends to the line where it opens."""
        lines = self._lines
        if lines is None:
            lines = self.lines()
        needle = _NEEDLES.get(name)
        if needle is None:
            needle = _NEEDLES[name] = name + "="
        opener = _STR_OPENERS.get(element)
        if opener is None:
            opener = _STR_OPENERS[element] = "<" + element
        if 0 < line <= len(lines):
            # The common case first (the loop's first step, when it returns at once): `name="…"` after the
            # opener on the line where the tag ends.
            text = lines[line - 1]
            lo = text.find(opener)
            if lo >= 0:
                pos = text.find(needle, lo + 1)
                q = pos + len(needle)
                good = pos > 0 and not (text[pos - 1].isalnum() or text[pos - 1] in ":_.-")
                if good and q < len(text) and text[q] in "\"'":
                    end = text.find(text[q], q + 1)
                    return line, q + 2, (end if end >= 0 else q + 1 + len(value)) + 1
        for ln in range(min(line, len(lines)) - 1, max(line - 200, 0) - 1, -1):
            text = lines[ln]
            lo = text.find(opener)
            start = lo + 1 if lo >= 0 else 0
            pos = text.find(needle, start)
            while pos > 0 and (text[pos - 1].isalnum() or text[pos - 1] in ":_.-"):
                pos = text.find(needle, pos + 1)
            if pos >= 0:
                q = pos + len(needle)
                if q < len(text) and text[q] in "\"'":
                    end = text.find(text[q], q + 1)
                    return ln + 1, q + 2, (end if end >= 0 else q + 1 + len(value)) + 1
            if name in text:
                # Spaces around `=` (`Weapon = "X"`): rare, so the regex runs only when the name is there.
                m = _attr_pattern(name).search(text, start)
                if m:
                    end = text.find(m.group(1), m.end())
                    return ln + 1, m.end() + 1, (end if end >= 0 else m.end() + len(value)) + 1
            if lo >= 0:
                break
        return line, 0, 0

    def content(self, line: int, value: str) -> tuple[int, int, int]:
        lines = self.lines()
        for ln in range(max(line - 1, 0), min(line + 40, len(lines))):
            text = lines[ln]
            start = text.find(">") + 1 if ln == line - 1 else 0
            col = text.find(value, start)
            if col >= 0:
                return ln + 1, col + 1, col + 1 + len(value)
        return line, 0, 0


def _split_ref(value: str, ref_type: str) -> tuple[str, str] | None:
    """(target type, id) of a reference value, or None for macros, expressions and empty values."""
    if value and value[0] not in "$= \t\r\n" and value[-1] not in "] \t\r\n" and ":" not in value:
        return ref_type, value  # the common case, without any string surgery
    value = value.strip()
    if not value or value[0] in "$=":
        return None
    if ":" in value:
        prefix, _, value = value.rpartition(":")
        prefix = prefix.rpartition(":")[2].strip()
        if prefix:
            ref_type = prefix
    if value.endswith("]"):
        value = _BRACKET_INDEX.sub("", value)
    value = value.strip()
    return (ref_type, value) if value else None


UNLOCATED = (
    "(asset, type, id, libxml2's line, searched value, list item or None, kind, element, parent, attr)"
)
"""The shape of a reference row before `locate_refs`: `Ref`'s fields, the three positions replaced."""


def locate_refs(rows: list[Any], data: bytes | None) -> list[Ref]:
    """`UNLOCATED` rows as `Ref`s, exactly as `finish_records(locate=True)` gives them: the same locator
    calls on the same text, then the same sort. Without the text (the file changed since it was parsed)
    each row keeps the line libxml2 reported with columns 0, what the locator answers when it finds nothing."""
    out: list[Ref] = []
    if data is None:
        out = [(r[0], r[1], r[2], r[3], 0, 0, r[6], r[7], r[8], r[9]) for r in rows]
    else:
        locator = _Locator(data)
        attribute, content = locator.attribute, locator.content
        for index, rtype, rid, line, value, item, kind, element, parent, attr in rows:
            if kind == "content":
                ln, col, end = content(line, value)
            else:
                ln, col, end = attribute(line, element, attr, value)
                if item is not None and col:
                    offset = value.find(item)
                    col, end = col + offset, col + offset + len(item)
            out.append((index, rtype, rid, ln, col, end, kind, element, parent, attr))
    out.sort(key=_BY_POSITION)
    return out


def extract_records(data: bytes, model: SchemaModel | None) -> FileRecords:
    """Records of one XML document. Never raises for bad input: problems become diagnostics."""
    return finish_records(begin_records(data), model)


class PendingRecords:
    """A parsed document whose includes are known but whose references are not extracted yet: the part of
    `extract_records` that needs no XSD model, so a cold build can follow includes while the model compiles
    (`parallel.prefetch`)."""

    __slots__ = ("assets", "locator", "rec", "root")

    def __init__(self, rec: FileRecords, root: Any = None, locator: _Locator | None = None) -> None:
        self.rec = rec
        self.root = root
        self.locator = locator
        self.assets: list[tuple[Any, str, int]] = []
        """(element, name, index in `rec.assets`) of every top-level asset, in document order."""


def begin_records(data: bytes) -> PendingRecords:
    """Parse and read everything the model does not decide: includes, defines, assets, `xi:include`s and
    the file's own diagnostics. `finish_records` adds the references."""
    rec = FileRecords()
    if len(data) > FILE_MAX_BYTES:
        rec.diagnostics.append(("parse-error", "error", 0, f"file is larger than {FILE_MAX_BYTES} bytes"))
        return PendingRecords(rec)
    lines = BLANKS_DROPPED_BELOW_LINES
    # A text of fewer bytes than that many lines cannot have them. One below `BLANKS_COUNTED_FROM_BYTES` is
    # parsed without its blank nodes and, in the rare case it reaches that line after all, again with them
    # (`_reaches`): no count of its newlines (~8 instructions a byte, 27 M of a cold RA3 build).
    blank: bool | None = (
        False
        if len(data) < lines
        else (data.count(b"\n") >= lines if len(data) >= BLANKS_COUNTED_FROM_BYTES else None)
    )
    parser = xml_parser(blank=bool(blank))
    try:
        # `isspace` stops at the first other byte (strip would copy the whole text to test it).
        text = _without_asset_ns(data) if data and not data.isspace() else None
        root = etree.fromstring(text, parser) if text is not None else None
        if blank is None and root is not None and _reaches(root, lines):
            parser = xml_parser(blank=True)
            root = etree.fromstring(text, parser)
    except etree.XMLSyntaxError as exc:  # recover=True still raises when nothing at all is usable
        root = None
        rec.diagnostics.append(("parse-error", "error", exc.lineno or 0, str(exc.msg or exc)))
    _parse_errors(parser, rec, data)
    if root is None:
        declared = (
            _DECLARED_ENCODING.match(data, 0, 200) if data[:2] not in (b"\xff\xfe", b"\xfe\xff") else None
        )
        if declared and declared.group(1).lower().startswith((b"utf-16", b"utf-32", b"ucs-2", b"ucs2")):
            # Readable as ASCII, so not UTF-16 text: an editor saved it in 8 bits and kept the declaration.
            name = declared.group(1).decode("ascii")
            rec.diagnostics.insert(
                0,
                (
                    "parse-error",
                    "error",
                    1,
                    f'the XML declaration says encoding="{name}" but the file has no byte-order mark and '
                    'reads as 8-bit text: change the declaration to encoding="utf-8" (or save the file '
                    "as UTF-16 with a byte-order mark)",
                ),
            )
        if not rec.diagnostics:
            rec.diagnostics.append(("parse-error", "error", 0, "no XML element found"))
        return PendingRecords(rec)
    rec.root = _local(root.tag)
    locator = _Locator(data)
    pending = PendingRecords(rec, root, locator)
    if rec.root != "AssetDeclaration":
        _xincludes(root, rec, locator)
        return pending
    seen: dict[tuple[str, str], int] = {}
    element = etree.Element
    local = _LOCAL
    for child in root[:]:  # one list made in C (see `_walk`); comments, PIs and entities are skipped
        ctag = child.tag
        if ctag.__class__ is not str:
            continue
        name = local.get(ctag) or _local(ctag)
        line = child.sourceline or 0
        if name in SPECIAL_ROOT_CHILDREN:
            if name == "Includes":
                for inc in child.iterchildren(tag=element):
                    if _local(inc.tag) == "Include":
                        rec.includes.append(
                            (
                                (inc.get("type") or "").strip().lower(),
                                (inc.get("source") or "").strip(),
                                locator.opener_line(inc.sourceline or 0, "Include"),
                            )
                        )
            elif name == "Defines":
                for d in child.iterchildren(tag=element):
                    if _local(d.tag) == "Define" and d.get("name"):
                        rec.defines.append(
                            (
                                d.get("name", ""),
                                d.get("value", ""),
                                locator.opener_line(d.sourceline or 0, "Define"),
                                (d.get("override") or "").strip().lower() == "true",
                            )
                        )
            continue
        if ctag == XI_INCLUDE:
            continue  # collected below with the nested ones
        if name == "Include":
            rec.diagnostics.append(
                (
                    "include-outside-includes",
                    "error",
                    line,
                    "<Include> must sit inside <Includes>; BAB ignores it here",
                )
            )
            continue
        asset_id = child.get("id")
        if not asset_id:
            rec.diagnostics.append(("missing-id", "error", line, f"<{name}> has no id attribute"))
            continue
        start = locator.opener_line(line, name)
        key = (name, asset_id.casefold())
        if key in seen:
            rec.diagnostics.append(
                (
                    "duplicate-instance",
                    "error",
                    start,
                    f"{name}:{asset_id} is defined twice in this file (first on line {seen[key]})",
                )
            )
        else:
            seen[key] = start
        pending.assets.append((child, name, len(rec.assets)))
        rec.assets.append((name, asset_id, start))
    _xincludes(root, rec, locator)
    return pending


def finish_records(pending: PendingRecords, model: SchemaModel | None, locate: bool = True) -> FileRecords:
    """`pending`'s references (typed by `model`; only `inheritFrom` without one) and `xai:joinAction`s.

    With `locate=False` the reference rows stay `UNLOCATED` (`FileRecords.located` is False): finding each
    row's line and columns in the text is ~15 % of a file's extraction, and a cold build's index is ready
    to answer without them — they are found per file, from its bytes, when a query first reads its rows."""
    rec, root, locator = pending.rec, pending.root, pending.locator
    if root is None or locator is None:
        return rec
    pending.root = pending.locator = None
    at = locator if locate else None
    if rec.root != "AssetDeclaration":
        _fragment(root, rec, model, locator, at)
    else:
        for child, name, index in pending.assets:
            _inherit_ref(child, name, index, rec, at)
            if model is not None:
                _walk(
                    child, model.asset_types.get(name) or model.fallback.get(name), index, model, rec, at, ""
                )
        pending.assets = []
        if at is not None:
            rec.ref_data.sort(key=_BY_POSITION)
    if at is None and rec.ref_data:
        rec.located = False
    if rec.root != "AssetDeclaration":
        return rec  # a fragment's joins are not read (they belong to the including asset's file)
    data = locator.data
    # The XPath walks the whole tree; most files have no joinAction at all, which the bytes tell at once
    # (unless the text is UTF-16, where the name's bytes are interleaved with NULs).
    joined = _JOINED(root) if b"joinAction" in data or b"\x00" in data else ()
    for el in joined:
        rec.joins.append((_local(el.tag), el.get(XAI_JOIN, ""), el.sourceline or 0))
        if el.get(XAI_JOIN, "").strip().lower() not in JOIN_ACTIONS:
            rec.diagnostics.append(
                (
                    "invalid-join-action",
                    "error",
                    el.sourceline or 0,
                    f"xai:joinAction={el.get(XAI_JOIN)!r}; valid values: Append, Replace, Remove",
                )
            )
    return rec


def _inherit_ref(
    el: etree._Element, name: str, index: int, rec: FileRecords, locator: _Locator | None
) -> None:
    """`inheritFrom="Id"` (the asset's own type) or `inheritFrom="Type:Id"` as a reference."""
    inherit = el.get("inheritFrom")
    if inherit:
        split = _split_ref(inherit, name)
        if split:
            line = el.sourceline or 0
            if locator is None:
                rec.ref_data.append(
                    (index, split[0], split[1], line, inherit, None, "inheritFrom", name, "", "inheritFrom")
                )
                return
            ln, col, end = locator.attribute(line, name, "inheritFrom", inherit)
            rec.ref_data.append(
                (index, split[0], split[1], ln, col, end, "inheritFrom", name, "", "inheritFrom")
            )


def _fragment(
    root: etree._Element,
    rec: FileRecords,
    model: SchemaModel | None,
    locator: _Locator,
    at: _Locator | None,
) -> None:
    """A file whose root is not `AssetDeclaration`. Pulled in by an `xi:include` inside an asset (e.g.
    `<CreateObjectDie>` under `<Behaviors>`), its references belong to that asset; spliced in at the root of
    a document (research/sage.md §1.4, XInclude semantics), its root — or with `xpointer(/n:X/child::*)` its
    children — become top-level assets. References under a child with an id carry that child's position
    in `spliceable`; the rest carry -1."""
    if root.get("id"):
        rec.spliceable.append(
            (rec.root, root.get("id", ""), locator.start_line(root.sourceline or 0, rec.root))
        )
        rec.root_has_id = True
        _inherit_ref(root, rec.root, 0, rec, at)
    children = []
    for child in root.iterchildren(tag=etree.Element):
        name = _local(child.tag)
        if child.get("id") and child.tag != XI_INCLUDE:
            children.append((child, name, len(rec.spliceable)))
            _inherit_ref(child, name, len(rec.spliceable), rec, at)
            rec.spliceable.append(
                (name, child.get("id", ""), locator.start_line(child.sourceline or 0, name))
            )
    if model is None:
        return
    root_type = model.fallback.get(rec.root)
    if not children:
        _walk(root, root_type, -1, model, rec, at, "")
    else:
        # The root's own attributes, then each child on its own so its references carry its index.
        kids = model.children.get(root_type or "", {})
        for attr, (ref_type, is_list) in model.attr_refs.get(root_type or "", {}).items():
            value = root.get(attr)
            if value:
                _emit(rec.ref_data, at, -1, root, rec.root, "", attr, value, ref_type, is_list)
        with_id = {id(c) for c, _n, _i in children}
        for child, name, index in children:
            ctype = model.asset_types.get(name) or kids.get(name) or model.fallback.get(name)
            _walk(child, ctype, index, model, rec, at, rec.root)
        for child in root.iterchildren(tag=etree.Element):
            if id(child) not in with_id and child.tag != XI_INCLUDE:
                name = _local(child.tag)
                _walk(child, kids.get(name) or model.fallback.get(name), -1, model, rec, at, rec.root)
    if at is not None:
        rec.ref_data.sort(key=_BY_POSITION)


NOT_UTF8 = (
    "bytes that are not UTF-8 (the file was probably saved as ANSI / windows-1252 while it declares UTF-8 "
    'or nothing): save it as UTF-8, or declare encoding="windows-1252" in its first line'
)
"""For libxml2's 'Invalid bytes in character encoding' in a UTF-8 file: what a modder saving in an editor's
ANSI mode hits, and BAB stops at (XML 1.0 §4.3.3: without a declaration or BOM the text must be UTF-8)."""


def _parse_errors(parser: etree.XMLParser, rec: FileRecords, data: bytes = b"") -> None:
    errors = [e for e in parser.error_log if e.level >= etree.ErrorLevels.ERROR]
    if not errors:
        return  # most files: no need to read their declaration
    utf8 = data[:2] not in (b"\xff\xfe", b"\xfe\xff") and _declared(data) in (None, "utf-8")
    for e in errors[:PARSE_ERRORS_MAX]:
        message = e.message.strip()
        if utf8 and e.type_name == "ERR_INVALID_ENCODING":
            message = NOT_UTF8
        rec.diagnostics.append(("parse-error", "error", e.line or 0, message))
    if len(errors) > PARSE_ERRORS_MAX:
        rec.diagnostics.append(
            ("parse-error", "error", 0, f"{len(errors) - PARSE_ERRORS_MAX} more parse errors not listed")
        )


def _xincludes(root: etree._Element, rec: FileRecords, locator: _Locator) -> None:
    data = locator.data
    if b"XInclude" not in data and b"\x00" not in data:
        # No element can be in the XInclude namespace unless the text declares it (entities are not
        # resolved and no DTD is loaded): the walk over every node in C is skipped for most files.
        return
    for xi in root.iter(XI_INCLUDE):
        nested = xi.getparent() is not root
        prefix = xi.prefix
        line = locator.start_line(xi.sourceline or 0, f"{prefix}:include" if prefix else "include")
        rec.xincludes.append(
            ((xi.get("href") or "").strip(), (xi.get("xpointer") or "").strip(), line, nested)
        )


_SKIP: Any = False
"""A child `_walk` does not descend into (its plan's entry for the child's tag)."""
_PLANS: tuple[Any, dict[Any, Any]] = (None, {})
"""(the model the plans were made for, {type key or None → plan}): one model at a time (a process holds
one), checked by identity; replaced whole, so a thread never sees one model's plans under another."""


def _plans(model: SchemaModel) -> dict[Any, Any]:
    """The plans of `model`'s types (`_plan`), made as the walks meet them."""
    global _PLANS
    cached = _PLANS
    if cached[0] is model:
        return cached[1]
    _PLANS = (model, {})
    return _PLANS[1]


def _plan(plans: dict[Any, Any], model: SchemaModel, t: str | None) -> tuple[Any, Any, dict[Any, Any]]:
    """What `_walk` does at an element of type `t` (None: a type the model does not know): (attribute
    checks as (name, target type, is list) or None, the text's reference spec or None, {child tag → (its
    type or None or `_SKIP`, its local name)} filled as tags are met). Made once per type and model: the
    walk then looks up one table per element and one entry per child, where it read `attr_refs`,
    `content_refs` and `children` for each element and, for each child, its local name, then its type
    under the parent, then its global meaning and whether that can hold a reference."""
    if t is None:
        attrs, content = None, None
    else:
        specs = model.attr_refs.get(t)
        attrs = tuple((a, sys.intern(r), li) for a, (r, li) in specs.items()) if specs else None
        content = model.content_refs.get(t)
    plan = plans[t] = (attrs, content, {})
    return plan


def _child_entry(model: SchemaModel, t: str | None, ctag: Any) -> tuple[Any, str]:
    """The plan entry of a child with tag `ctag` under an element of type `t`: its type under the parent,
    else the name's global type when its subtree can hold a reference; None (look below it anyway) for
    an element the model does not know; `_SKIP` for comments, PIs, entities, `xi:include`s and the
    children that cannot hold a reference."""
    if ctag.__class__ is not str:
        return _SKIP, ""
    cname = _LOCAL.get(ctag) or _local(ctag)
    kids = model.children.get(t) if t is not None else None
    ct = kids.get(cname) if kids else None
    if ct is None:
        ct = model.fallback.get(cname)
        if ct is None:
            return (_SKIP if ctag == XI_INCLUDE else None), cname
        if ct not in model.with_refs:
            return _SKIP, cname
    elif not ct:
        return _SKIP, cname  # declared here, and nothing below it can reference anything
    return ct, cname


def _walk(
    top: etree._Element,
    top_type: str | None,
    index: int,
    model: SchemaModel,
    rec: FileRecords,
    locator: _Locator | None,
    top_parent: str,
) -> None:
    """Typed references below one asset: each element's type comes from its parent's type (the same name
    means different things under different parents), falling back to the name's global meaning."""
    refs = rec.ref_data
    unlocated = locator is None
    plans = _plans(model)
    # Each entry carries the element's local name, found when its parent looked at it: `el.tag` builds a
    # new `{namespace}name` string on every read, so it is read once per element.
    stack: list[tuple[etree._Element, str | None, str, str]] = [
        (top, top_type, top_parent, _LOCAL.get(top.tag) or _local(top.tag))
    ]
    pop, push = stack.pop, stack.append
    while stack:
        el, t, parent, name = pop()
        attrs, content, entries = plans.get(t) or _plan(plans, model, t)
        if attrs is not None:
            get = el.get
            for attr, ref_type, is_list in attrs:
                value = get(attr)
                if value:
                    if (
                        unlocated
                        and not is_list
                        and value[0] not in "$= \t\r\n"
                        and value[-1] not in "] \t\r\n"
                        and ":" not in value
                    ):
                        # `_emit`'s UNLOCATED row for the common case (`_split_ref`'s first test),
                        # without the call: 2 of 3 rows of a cold build.
                        refs.append(
                            (
                                index,
                                ref_type,
                                value,
                                el.sourceline or 0,
                                value,
                                None,
                                "attribute",
                                name,
                                parent,
                                attr,
                            )
                        )
                    else:
                        _emit(refs, locator, index, el, name, parent, attr, value, ref_type, is_list)
        if content is not None:
            text = el.text
            if text and text.strip():
                _emit(refs, locator, index, el, name, parent, "", text, content[0], content[1])
        if not len(el):
            continue  # a leaf (most elements the walk reaches): no list to build
        # `el[:]` is a list made in one C call (no iterator object, no tag matcher per element: fewer
        # instructions for the walk than `iterchildren(tag=Element)`, cachegrind on RA3Afterdash); it also
        # holds comments, PIs and entity references, which the plan skips by their tag.
        for child in el[:]:
            ctag = child.tag
            entry = entries.get(ctag)
            if entry is None:
                entry = entries[ctag] = _child_entry(model, t, ctag)
            ct = entry[0]
            if ct is not _SKIP:
                push((child, ct, name, entry[1]))


def _emit(
    refs: list[Any],
    locator: _Locator | None,
    index: int,
    el: etree._Element,
    element: str,
    parent: str,
    attr: str,
    value: str,
    ref_type: str,
    is_list: bool,
) -> None:
    line = el.sourceline or 0
    values = value.split() if is_list else [value]
    for v in values:
        split = _split_ref(v, ref_type)
        if split is None:
            continue
        if locator is None:
            # UNLOCATED: what `locate_refs` needs in place of line, column and end column.
            refs.append(
                (
                    index,
                    sys.intern(split[0]),
                    split[1],
                    line,
                    value if attr else v.strip(),
                    v if attr and is_list else None,
                    "attribute" if attr else "content",
                    element,
                    parent,
                    attr,
                )
            )
            continue
        if attr:
            ln, col, end = locator.attribute(line, element, attr, value)
            if is_list and col:
                offset = value.find(v)
                col, end = col + offset, col + offset + len(v)
        else:
            ln, col, end = locator.content(line, v.strip())
        refs.append(
            (
                index,
                sys.intern(split[0]),
                split[1],
                ln,
                col,
                end,
                "attribute" if attr else "content",
                element,
                parent,
                attr,
            )
        )


def shallow_scan(data: bytes) -> FileRecords:
    """Top-level assets and includes of an art file (`.w3x`) without building its DOM (files reach 20 MB)."""
    rec = FileRecords(shallow=True)
    if len(data) > FILE_MAX_BYTES:
        rec.diagnostics.append(("parse-error", "error", 0, f"file is larger than {FILE_MAX_BYTES} bytes"))
        return rec
    depth = 0
    in_includes = False
    try:
        for event, el in etree.iterparse(
            io.BytesIO(data),
            events=("start", "end"),
            recover=True,
            huge_tree=True,
            resolve_entities=False,
            no_network=True,
            remove_comments=True,
        ):
            if event == "start":
                depth += 1
                if depth == 1:
                    rec.root = _local(el.tag)
                elif depth == 2:
                    name = _local(el.tag)
                    in_includes = name == "Includes"
                    if name not in SPECIAL_ROOT_CHILDREN and el.get("id"):
                        rec.assets.append((name, el.get("id", ""), el.sourceline or 0))
                elif depth == 3 and in_includes and _local(el.tag) == "Include":
                    rec.includes.append(
                        (
                            (el.get("type") or "").strip().lower(),
                            (el.get("source") or "").strip(),
                            el.sourceline or 0,
                        )
                    )
            else:
                depth -= 1
                if depth == 1:
                    el.clear()
                    parent = el.getparent()
                    if parent is not None:
                        while el.getprevious() is not None:
                            del parent[0]
    except etree.XMLSyntaxError as exc:
        rec.diagnostics.append(("parse-error", "error", exc.lineno or 0, str(exc.msg or exc)))
    return rec
