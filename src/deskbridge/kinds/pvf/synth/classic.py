"""Deterministic synthetic classic archives (`deskbridge pvf synth --family classic`), `small` to `classic-200k`.

Content comes from `synth/content.py`; scripts are compiled by the real classic codec against a string table
built in first-use order (like pvf-parser-ts), `.str`/`.nut` are encoded like a real pack, and the archive is
written by the same builder the editor uses — so every synthetic archive also exercises the writer.
"""

from __future__ import annotations

from pathlib import Path

from deskbridge.core.files import atomic_write
from deskbridge.kinds.pvf.archive.base import Progress
from deskbridge.kinds.pvf.archive.classic import build_classic
from deskbridge.kinds.pvf.archive.classic_text import NUT_ENCODING
from deskbridge.kinds.pvf.script import classic_codec
from deskbridge.kinds.pvf.strings.encodings import GB18030, WINDOWS_950, resolve_encoding
from deskbridge.kinds.pvf.strings.stringtable import StringTable
from deskbridge.kinds.pvf.synth.content import generate_content

GUID = b"5d1c3a2b-7e4f-4a1b-9c8d-0e1f2a3b4c5d"


def classic_payloads(
    files: int,
    seed: int,
    encoding: str = WINDOWS_950,
    progress: Progress | None = None,
    annotated: bool = False,
) -> list[tuple[str, bytes]]:
    """(path, payload) of every file of the synthetic archive, `stringtable.bin` last; `annotated` adds the
    annotation fixtures of `synth/annotated.py`."""
    encoding = resolve_encoding(encoding)
    table = StringTable([], encoding)
    out: list[tuple[str, bytes]] = []
    language = language_for(encoding)
    content = generate_content(files, seed, language=language)
    if annotated:
        from deskbridge.kinds.pvf.synth.annotated import with_fixtures

        content = with_fixtures(content, traditional=language == "hant", root_lists=False)
    for i, lf in enumerate(content):
        if lf.kind in ("script", "lst"):
            out.append((lf.path, classic_codec.compile_text(lf.text, table)))
        elif lf.kind == "nut":
            out.append((lf.path, lf.text.encode(NUT_ENCODING)))
        else:
            out.append((lf.path, lf.text.encode(encoding)))
        if progress is not None and i % 1000 == 0:
            progress(i, files)
    out.append(("stringtable.bin", table.to_bytes()))
    return out


def language_for(encoding: str) -> str:
    """Filler language a pack encoding can hold (`synth/content.py` LANGUAGES)."""
    enc = resolve_encoding(encoding)
    return {WINDOWS_950: "hant", "cp949": "ko", "cp932": "ja", GB18030: "hans-gb18030"}.get(enc, "hans")


def synth_classic(
    path: str | Path,
    files: int,
    seed: int,
    *,
    encoding: str = WINDOWS_950,
    progress: Progress | None = None,
    annotated: bool = False,
) -> int:
    """Write a synthetic classic archive of `files` files (≥ 20) to `path` atomically; returns the count."""
    files = max(files, 20)
    payloads = classic_payloads(files, seed, encoding, progress, annotated)
    count = 0

    def fill(out) -> None:  # type: ignore[no-untyped-def]
        nonlocal count
        count = build_classic(out, payloads, guid=GUID)

    atomic_write(Path(path), fill)
    if progress is not None:
        progress(files, files)
    return count
