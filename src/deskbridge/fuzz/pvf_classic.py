"""Fuzz targets for the classic PVF parsers: archive header/tree/blocks, script codec, text dialect,
stringtable.bin, `.str` and `.lst` — with round-trip properties where the format promises one."""

from __future__ import annotations

import contextlib
import io

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.archive.classic import ClassicArchive, build_classic
from deskbridge.kinds.pvf.lists import parse_classic_list
from deskbridge.kinds.pvf.script import classic_codec
from deskbridge.kinds.pvf.script import text as dialect
from deskbridge.kinds.pvf.strings.strfile import StrFile
from deskbridge.kinds.pvf.strings.stringtable import StringTable, build_stringtable

_MAX_FILES = 64


def _table() -> StringTable:
    return StringTable.parse(
        build_stringtable(
            [b"[name]", b"[/name]", b"item", "劍".encode("windows-950"), b"a`b", b"x", b"x", b"\xff\xfe"]
        ),
        "windows-950",
    )


def fuzz_archive(data: bytes) -> None:
    """Open, list, read and render a classic archive from arbitrary bytes."""
    ar = ClassicArchive.open(data, encoding="tw")
    for path in ar.paths()[:_MAX_FILES]:
        ar.read(path)
        ar.file_info(path)
        with contextlib.suppress(BridgeError):
            ar.read_text(path)


def fuzz_script(data: bytes) -> None:
    """Decompile arbitrary bytes as a script; whatever decompiles must compile back byte-identical."""
    table = _table()
    payload = classic_codec.MAGIC + data
    text = classic_codec.decompile(payload, table, lambda i, k: "t`x")
    again = classic_codec.compile_text(text, table)
    if again != payload:
        raise AssertionError("decompile → compile changed the bytes")


def fuzz_text(data: bytes) -> None:
    """Lex arbitrary text; what lexes must print and lex back to the same tokens."""
    text = data.decode("utf-8", "replace")
    tokens = dialect.lex(text)
    if dialect.lex(dialect.print_tokens(tokens)) != tokens:
        raise AssertionError("print → lex changed the tokens")
    with contextlib.suppress(BridgeError):
        classic_codec.from_tokens(tokens, _table(), text)


def fuzz_stringtable(data: bytes) -> None:
    table = StringTable.parse(data, "windows-950")
    for i in range(min(len(table), 256)):
        table.get(i)
    if table.to_bytes() != data:
        raise AssertionError("an unchanged table must serialise to its input")


def fuzz_str(data: bytes) -> None:
    f = StrFile.decode(data, "windows-950")
    f.entries()
    if f.encode("windows-950") != data:
        raise AssertionError(".str text must re-encode to its input")


def fuzz_lst(data: bytes) -> None:
    parse_classic_list("equipment/equipment.lst", classic_codec.MAGIC + data, _table())


TARGETS = {
    "archive": fuzz_archive,
    "script": fuzz_script,
    "text": fuzz_text,
    "stringtable": fuzz_stringtable,
    "str": fuzz_str,
    "lst": fuzz_lst,
}


def _seed_archive() -> bytes:
    from deskbridge.kinds.pvf.synth.classic import classic_payloads

    out = io.BytesIO()
    build_classic(out, classic_payloads(24, seed=1)[:24])
    return out.getvalue()


def _seeds() -> dict[str, list[bytes]]:
    from deskbridge.kinds.pvf.synth.classic import classic_payloads

    payloads = classic_payloads(24, seed=1)
    scripts = [d[2:] for _, d in payloads if d[:2] == classic_codec.MAGIC][:8]
    texts = [d for p, d in payloads if p.endswith(".str")][:4]
    lst = [d[2:] for p, d in payloads if p.endswith(".lst")][:4]
    sample_text = "#PVF_File\n[name]\n\t<0::name_1`劍`>\n[x]\t1\t-2\t3.5\t{3=5}\t{6=`up`}\t`a``b`\t[/x]\n"
    return {
        "archive": [_seed_archive()],
        "script": scripts,
        "text": [sample_text.encode("utf-8")],
        "stringtable": [dict(payloads)["stringtable.bin"][:4096], build_stringtable([b"a", b"bc", b""])],
        "str": texts,
        "lst": lst,
    }


SEEDS = _seeds()
