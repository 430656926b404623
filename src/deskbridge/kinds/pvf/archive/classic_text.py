"""Text views of a classic archive's files: scripts, `.str`/`.nut` text, the string table listing, links.

`read_text(path)` / `text_to_payload(path, text)` are the archive's editable-text API (used by the CLI
`cat`/`extract`/`pack` and later by the MCP workspace). Compiling new strings appends them to
`stringtable.bin`, which is then staged with the script (docs/pvf-script-text.md "Strings").
"""

from __future__ import annotations

import posixpath
import re
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.archive.base import norm_path
from deskbridge.kinds.pvf.archive.budget import text_budget
from deskbridge.kinds.pvf.lists import N_STRING_LST, Registry, parse_classic_list
from deskbridge.kinds.pvf.script import classic_codec
from deskbridge.kinds.pvf.script import text as dialect
from deskbridge.kinds.pvf.strings.encodings import cannot_encode
from deskbridge.kinds.pvf.strings.strfile import StrFile
from deskbridge.kinds.pvf.strings.stringtable import StringTable

if TYPE_CHECKING:
    from deskbridge.kinds.pvf.archive.classic import ClassicArchive

STRINGTABLE = "stringtable.bin"
STRINGTABLE_HEADER = "#PVF_StringTable"
NUT_ENCODING = "cp949"
"""`.nut` Squirrel scripts are CP949 whatever the pack encoding (pvf-parser-ts `encodingForKey`)."""
_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""Control characters that mark a payload as binary (TAB, CR, LF are text)."""


def text_encoding_for(path: str, pack_encoding: str) -> str:
    return NUT_ENCODING if norm_path(path).endswith(".nut") else pack_encoding


def decode_text(data: bytes, encoding: str) -> str | None:
    """Strictly decoded text, or None when the bytes are not clean text in `encoding` (binary payload) or
    would not encode back to the same bytes (code page 950 has duplicate code points, e.g. F9F9 and A2A4 → ═)."""
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        return None
    if _CONTROL_RE.search(text.rstrip("\0")) is not None or text.encode(encoding) != data:
        return None
    return text


class ClassicStrings:
    """The string table, link resolution and text conversions of one classic archive."""

    def __init__(self, archive: ClassicArchive) -> None:
        self.archive = archive
        self._table: StringTable | None = None
        self._nstring: Registry | None = None
        self._str_cache: dict[str, dict[str, str]] = {}
        self._self_staging = False
        self._generation = 0
        """Counts invalidations: tables read before one are not installed after it (`warm`)."""
        self.missing_links: dict[tuple[int, str], str] = {}
        """Links that resolved to nothing while decompiling, with why (for `verify`; at most 10,000)."""

    # ------------------------------------------------------------------------------------------- tables

    @property
    def table(self) -> StringTable:
        if self._table is None:
            enc = self.archive.encoding
            data = self.archive.read(STRINGTABLE) if self.archive.exists(STRINGTABLE) else b""
            self._table = StringTable.parse(data, enc)
        return self._table

    def nstring(self) -> Registry:
        if self._nstring is None:
            reg = Registry(N_STRING_LST, root_relative=True)
            if self.archive.exists(N_STRING_LST):
                try:
                    reg = parse_classic_list(N_STRING_LST, self.archive.read(N_STRING_LST), self.table)
                    reg.root_relative = True  # n_string.lst paths are root-relative (research §2A)
                except BridgeError as exc:
                    self.archive.warnings.append(exc)
            self._nstring = reg
        return self._nstring

    def str_entries(self, path: str) -> dict[str, str]:
        key = norm_path(path)
        if key not in self._str_cache:
            entries: dict[str, str] = {}
            if self.archive.exists(key):
                # lookups only: a lenient decode still resolves the keys of a file that is not clean text
                text = self.archive.read(key).decode(self.archive.encoding, "replace")
                entries = StrFile.from_text(text).entries()
            self._str_cache[key] = entries
        return self._str_cache[key]

    def link_text(self, table_id: int, key: str) -> str | None:
        """Text of `<table_id::key>`: n_string.lst entry → `.str` file → `key>value` (None when unresolved)."""
        path = self.nstring().get(table_id)
        if path is None:
            self._missing(table_id, key, f"table {table_id} is not in {N_STRING_LST}")
            return None
        found = self.str_entries(path).get(key)
        if found is None:
            why = (
                f"'{path}' has no key '{key}'"
                if self.archive.exists(path)
                else f"'{path}' is not in the archive"
            )
            self._missing(table_id, key, why)
        return found

    def _missing(self, table_id: int, key: str, why: str) -> None:
        if len(self.missing_links) < 10_000:
            self.missing_links.setdefault((table_id, key), why)

    def duplicate_keys(self) -> list[str]:
        """`path: key` of every key repeated in a `.str` file that n_string.lst names (see StrFile)."""
        out = []
        for _, path in self.nstring():
            if self.archive.exists(path):
                text = self.archive.read(path).decode(self.archive.encoding, "replace")
                out.extend(f"{path}: {key}" for key in StrFile.from_text(text).duplicate_keys())
        return out

    def _link_edits(self, text: str, tokens: list[dialect.Token] | None = None) -> dict[str, bytes]:
        """`.str` payloads for the link texts `text` changes (pvfVSCode's behaviour: the text inside
        `<id::key`…`>` is the `.str` value, so editing it edits that entry). An empty text changes nothing
        (the decompiler prints one for an unresolved link); two different texts for one key are refused.
        `tokens` is `text` already lexed (the compile needs them too: lexing is most of its cost)."""
        if "::" not in text:
            return {}
        wanted: dict[tuple[int, str], str] = {}
        link = dialect.Kind.LINK
        # the links alone first: this runs for every compiled text with a `::`, over all of its tokens
        links = [tok for tok in (dialect.lex(text) if tokens is None else tokens) if tok.kind is link]
        for tok in links:
            if not tok.link_text:
                continue
            key = str(tok.value)
            if self.link_text(tok.link_id, key) == tok.link_text:
                continue
            prev = wanted.setdefault((tok.link_id, key), tok.link_text)
            if prev != tok.link_text:
                raise BridgeError(
                    ErrorCode.UNSUPPORTED_CHANGE,
                    f"<{tok.link_id}::{key}> is given two different texts ({prev!r} and {tok.link_text!r}); "
                    "a link's text is one .str entry",
                    "Give every link to that key the same text.",
                    data={"table": tok.link_id, "key": key},
                )
        files: dict[str, StrFile] = {}
        for (table_id, key), value in wanted.items():
            path = self.nstring().get(table_id)
            if path is None or not self.archive.exists(path):
                raise BridgeError(
                    ErrorCode.NOT_FOUND,
                    f"the text of <{table_id}::{key}> was edited, but "
                    + (
                        f"table {table_id} is not in {N_STRING_LST}"
                        if path is None
                        else f"'{path}' is missing"
                    )
                    + ", so there is no .str entry to change",
                    f"Register the table in {N_STRING_LST} (or restore the .str file), or put the text back.",
                    data={"table": table_id, "key": key},
                )
            if path not in files:
                files[path] = StrFile.decode(self.archive.read(path), self.archive.encoding)
            try:
                files[path].set(key, value)
            except BridgeError as exc:
                exc.message = f"<{table_id}::{key}>: {exc.message}"
                raise
        out = {}
        for path, f in files.items():
            try:
                out[path] = f.encode(self.archive.encoding)
            except UnicodeEncodeError as exc:
                raise cannot_encode(f.to_text(), self.archive.encoding, exc, where=f"'{path}'") from None
        return out

    def warm(self, lock: AbstractContextManager[object]) -> None:
        """Read what a compile needs first — the string table and its lookup index, n_string.lst and the
        `.str` files it names — so that the first compile does not pay for them (≈ 1 s on classic-200k).

        `lock` guards this archive (the engine lock). The bytes are taken under it, the tables built outside
        it (nothing waits on them), and installed under it only where nothing was staged meanwhile and no
        compile read them first. Best effort: on any failure (the archive closed meanwhile…) the first compile
        reads them itself."""
        try:
            self._warm(lock)
        except Exception:
            return

    def _warm(self, lock: AbstractContextManager[object]) -> None:
        with lock:
            if self._table is not None and self._nstring is not None:
                return
            generation = self._generation
            enc = self.archive.encoding
            table_data = self.archive.read(STRINGTABLE) if self.archive.exists(STRINGTABLE) else b""
            list_data = self.archive.read(N_STRING_LST) if self.archive.exists(N_STRING_LST) else None
        table = StringTable.parse(table_data, enc)
        table.index_of("")
        reg = Registry(N_STRING_LST, root_relative=True)
        if list_data is not None:
            reg = parse_classic_list(N_STRING_LST, list_data, table)
            reg.root_relative = True
        with lock:
            if generation != self._generation:
                return
            if self._table is None:
                self._table = table
            if self._nstring is None and self._table is table:
                self._nstring = reg
            paths = [path for _, path in self._nstring] if self._nstring is reg else []
            raw = {
                p: self.archive.read(p)
                for p in paths
                if norm_path(p) not in self._str_cache and self.archive.exists(p)
            }
        parsed = {
            norm_path(p): StrFile.from_text(data.decode(enc, "replace")).entries() for p, data in raw.items()
        }
        with lock:
            if generation == self._generation:
                for key, entries in parsed.items():
                    self._str_cache.setdefault(key, entries)

    def invalidate(self, path: str) -> None:
        self._generation += 1
        key = norm_path(path)
        if key == STRINGTABLE and not self._self_staging:
            self._table = None
            self._nstring = None
        elif key == N_STRING_LST:
            self._nstring = None
        self._str_cache.pop(key, None)

    # ------------------------------------------------------------------------------------------- text

    def record_width(self, path: str) -> int | None:
        return 2 if norm_path(path).endswith(".lst") else None

    def decompile(self, path: str, data: bytes) -> str:
        return classic_codec.decompile(data, self.table, self.link_text, record_width=self.record_width(path))

    def list_prefix_text(self, path: str, data: bytes, count: int) -> tuple[str, int] | None:
        """The text of the first `count` tokens of a `.lst` payload made of int and string tokens only — the
        first lines of `read_text`'s text, one record per line — and how many tokens it has; None for any
        other payload (read its whole text). None too when the whole text could be over the text budget, so
        that the refusal stays `read_text`'s."""
        if not norm_path(path).endswith(".lst") or not classic_codec.is_script(data):
            return None
        recs = classic_codec.read_tokens(data)
        types = recs["t"]
        strs = types == classic_codec.T_STRING
        if not (strs | (types == classic_codec.T_INT)).all():
            return None
        table = self.table
        n = len(table)
        # decoded characters never outnumber the entry's bytes in these byte encodings: a safe upper bound
        chars = sum(len(table.raw(i)) for i in recs["v"][strs].tolist() if 0 <= i < n)
        if chars > text_budget(len(data)):
            return None
        return self.decompile(path, data[: 2 + 5 * max(0, count)]), len(recs)

    def read_text(self, path: str) -> str:
        """Editable text of a file; INVALID_ARGUMENT for binary payloads (read them as bytes)."""
        data = self.archive.read(path)
        key = norm_path(path)
        if key == STRINGTABLE:
            return self.stringtable_listing()
        if classic_codec.is_script(data):
            return self.decompile(path, data)
        text = decode_text(data, text_encoding_for(path, self.archive.encoding))
        if text is None:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"'{path}' is binary, not text; read its bytes instead",
                data={"path": path, "size": len(data)},
            )
        return text

    def stringtable_listing(self) -> str:
        table = self.table
        lines = [STRINGTABLE_HEADER]
        for i in range(len(table)):
            s = table.get(i)
            if s is None or "\0" in s or s.encode(table.encoding) != table.raw(i):
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"stringtable.bin entry {i} is not clean text in {table.encoding}; read its bytes",
                    data={"index": i},
                )
            lines.append(dialect.quote(s))
        return "\n".join(lines) + "\n"

    def text_to_payload(self, path: str, text: str) -> bytes:
        """Editable text → payload bytes; a script that adds strings also stages the grown stringtable.bin."""
        key = norm_path(path)
        if key == STRINGTABLE:
            return self._listing_to_table(text)
        if text.lstrip("\ufeff \t\r\n").startswith(classic_codec.HEADER_LINE) or self._is_script_path(key):
            body = text.lstrip("\ufeff")
            tokens = dialect.lex(body)  # once, for the link edits and the compile
            str_edits = self._link_edits(body, tokens)
            table = self.table
            before = table.appended
            payload = classic_codec.from_tokens(tokens, table, body)
            if table.appended != before:
                self._self_staging = True
                try:
                    self.archive.stage(STRINGTABLE, table.to_bytes())
                finally:
                    self._self_staging = False
            for str_path, data in str_edits.items():
                self.archive.stage(str_path, data)
            return payload
        enc = text_encoding_for(path, self.archive.encoding)
        try:
            return text.encode(enc)
        except UnicodeEncodeError as exc:
            err = cannot_encode(text, enc, exc, where=f"'{path}'")
            err.data["path"] = path
            raise err from None

    def _is_script_path(self, key: str) -> bool:
        if self.archive.exists(key):
            return classic_codec.is_script(self.archive.read(key))
        return False

    def _listing_to_table(self, text: str) -> bytes:
        tokens = dialect.lex(text)
        wanted = []
        for tok in tokens:
            if tok.kind is not dialect.Kind.STRING:
                raise dialect.syntax_error(
                    text, max(tok.pos, 0), "stringtable.bin text holds one `string` per line"
                )
            wanted.append(str(tok.value))
        table = self.table
        for i in range(len(table)):
            if i >= len(wanted) or table.get(i) != wanted[i]:
                raise BridgeError(
                    ErrorCode.UNSUPPORTED_CHANGE,
                    f"stringtable.bin entry {i} was changed or removed; entries can only be appended",
                    hint="Scripts refer to strings by index: keep existing lines, add new ones at the end.",
                )
        for s in wanted[len(table) :]:
            table.append(s)
        return table.to_bytes()


def lst_base_dir(list_path: str) -> str:
    return posixpath.dirname(norm_path(list_path))
