"""Fuzz targets for the markdown kind's untrusted inputs: browser change sets, edit ranges and offsets, file
bytes (encodings, line endings, front matter), outline/section scanning and the renderer.

Each target decodes the fuzz bytes into the structure a browser or an MCP client could send, runs it, and
checks the invariants that matter: an accepted change set keeps UTF-16 and code-point lengths consistent, a
refused one leaves the document unchanged, offsets round-trip, and nothing raises anything but BridgeError.
"""

from __future__ import annotations

import contextlib
import json

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.markdown.collab import (
    CollabDocument,
    Edit,
    apply_edits,
    changes_to_edits,
    edits_to_changes,
    map_range,
)
from deskbridge.kinds.markdown.document import decode_file, encode_text
from deskbridge.kinds.markdown.edits import replace_text_edits, resolve_range
from deskbridge.kinds.markdown.line_endings import with_endings
from deskbridge.kinds.markdown.offsets import OffsetMap, utf16_len
from deskbridge.kinds.markdown.outline import front_matter_span, outline
from deskbridge.kinds.markdown.render import front_matter_table, render_html
from deskbridge.kinds.markdown.sections import find_section, patch_section_edit

_BASE = "# Title\n\nHello 😀 world, 中文.\n\n## Sub\n\n- a\n- b\n"


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def fuzz_changeset_json(data: bytes) -> None:
    """Arbitrary JSON as a pushed CodeMirror change set: accepted consistently, or refused without change."""
    try:
        changes = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return
    doc = CollabDocument(_BASE)
    try:
        ok = doc.push(0, [{"clientID": "fuzz", "changes": changes}])
    except BridgeError:
        assert doc.text == _BASE and doc.version == 0
        return
    assert ok
    assert utf16_len(doc.text) == OffsetMap(doc.text).length_utf16


def fuzz_changeset_bytes(data: bytes) -> None:
    """Change sets built from bytes (retain/delete/insert ops) so the fuzzer reaches deep, valid shapes."""
    text = _BASE
    changes: list[object] = []
    i = 0
    while i + 1 < len(data):
        op, n = data[i] % 3, data[i + 1]
        if op == 0:
            changes.append(n % 8)
        elif op == 1:
            changes.append([n % 5])
        else:
            changes.append([n % 3, _text(data[i + 2 : i + 2 + n % 6])])
            i += n % 6
        i += 2
    total = utf16_len(text)
    used = sum(c if isinstance(c, int) else c[0] for c in changes)  # type: ignore[index]
    if used < total:
        changes.append(total - used)
    try:
        edits = changes_to_edits(changes, text)
    except BridgeError:
        return
    new = apply_edits(text, edits)
    new.encode("utf-8")


def fuzz_collab_sequence(data: bytes) -> None:
    """Interleaved browser pushes and server edits: the queued (lazy) text and the derived offset tables always
    equal a plain replay and a fresh scan."""
    doc = CollabDocument(_BASE)
    model = _BASE
    pieces = ["", "x", "😀", "\n", "中文", "a\nb", "𝄞\n"]
    i = 0
    while i + 3 < len(data):
        op, a, b, c = data[i], data[i + 1], data[i + 2], data[i + 3]
        i += 4
        length = len(model)
        start = a % (length + 1)
        end = min(length, start + b % 6)
        insert = pieces[c % len(pieces)]
        edits = [Edit(start, end, insert)]
        if op % 3 == 0:
            doc.apply("mcp:fuzz", edits)
        else:
            changes = edits_to_changes(edits, model)
            assert doc.push(doc.version, [{"clientID": "tab", "changes": changes}])
        model = apply_edits(model, edits)
        if op % 5 == 0:  # read sometimes, so both lazy and materialized paths run
            assert doc.text == model
        om = doc.offsets
        assert om.length_cp == len(model) and om.length_utf16 == utf16_len(model)
        if op % 7 == 0:
            fresh = OffsetMap(model)
            probe = (a * 7919) % (len(model) + 1)
            assert om.cp_to_utf16(probe) == fresh.cp_to_utf16(probe)
            assert list(om.newline_positions) == list(fresh.newline_positions)
    assert doc.text == model


def fuzz_offsets(data: bytes) -> None:
    """Offsets in every unit round-trip or are refused with BridgeError."""
    text = _text(data[4:]) if len(data) > 4 else _BASE
    om = OffsetMap(text)
    pos = int.from_bytes(data[:4].ljust(4, b"\0"), "little") % (len(text) + 3)
    try:
        u16 = om.cp_to_utf16(pos)
        assert om.utf16_to_cp(u16) == pos
        b = om.cp_to_utf8(pos)
        assert om.utf8_to_cp(b) == pos
        line, col = om.cp_to_line_col(pos)
        assert om.line_col_to_cp(line, col) == pos
    except BridgeError:
        assert pos > len(text)
    for probe in (pos, pos + 1):
        with contextlib.suppress(BridgeError):
            om.utf16_to_cp(probe)


def fuzz_edit_ranges(data: bytes) -> None:
    """MCP edit ranges (offsets/lines/columns, any values) either resolve inside the text or raise BridgeError;
    ranges mapped over a concurrent edit stay inside the new text."""
    nums = [
        int.from_bytes(data[i : i + 2].ljust(2, b"\0"), "little") for i in range(0, min(len(data), 16), 2)
    ]
    nums += [0] * (8 - len(nums))
    om = OffsetMap(_BASE)
    try:
        if nums[0] % 2:
            rng = resolve_range(om, start_offset=nums[1] % 80, length=nums[2] % 40)
        else:
            rng = resolve_range(
                om,
                start_line=nums[1] % 12 or 1,
                start_column=nums[2] % 30 or 1,
                end_line=nums[3] % 12 or 1,
                end_column=nums[4] % 30 or 1,
            )
    except BridgeError:
        return
    assert 0 <= rng.start <= rng.end <= len(_BASE)
    concurrent = [Edit(min(nums[5] % 60, len(_BASE)), min(nums[5] % 60 + nums[6] % 5, len(_BASE)), "xy")]
    mapped = map_range(rng.start, rng.end, concurrent)
    if mapped is not None:
        after = apply_edits(_BASE, concurrent)
        assert 0 <= mapped[0] <= mapped[1] <= len(after)
        assert after[mapped[0] : mapped[1]] == _BASE[rng.start : rng.end]


def fuzz_file_bytes(data: bytes) -> None:
    """Any file bytes decode (or raise ENCODING_MISMATCH) and re-encode to the same bytes modulo line endings."""
    for enc in ("utf-8", "gb18030"):
        try:
            decoded = decode_file(data, enc)
        except BridgeError:
            continue
        assert "\r" not in decoded.text
        with contextlib.suppress(BridgeError):
            encode_text(decoded.text, decoded.encoding, decoded.newline, decoded.bom)
        if decoded.mixed is not None and enc == "utf-8":  # each line's own ending: the very same bytes
            text, _ = with_endings(decoded.text, decoded.mixed, decoded.newline)
            assert encode_text(text, enc, "\n", decoded.bom) == data


def fuzz_front_matter(data: bytes) -> None:
    """Front matter (YAML) of any shape: the span stays inside the text and the table renders."""
    text = "---\n" + _text(data) + "\n---\n# After\n"
    span = front_matter_span(text)
    assert 0 <= span <= len(text)
    if span:
        front_matter_table(text[4:span])
    render_html(text)


def fuzz_outline_and_sections(data: bytes) -> None:
    """Outline lines are inside the text and sorted; section patches apply cleanly."""
    text = _text(data)
    heads = outline(text)
    total = text.count("\n") + 1
    assert all(1 <= h.line <= h.end_line + 1 and h.line <= total for h in heads)
    assert [h.line for h in heads] == sorted(h.line for h in heads)
    if heads:
        try:
            _, edit = patch_section_edit(text, " > ".join(heads[0].path), "append", "x")
            apply_edits(text, [edit])
            find_section(text, heads[-1].title or "x")
        except BridgeError:
            pass


def fuzz_replace_text(data: bytes) -> None:
    """Exact-text replacement: either the right number of edits or a typed refusal."""
    cut = data[0] % 16 if data else 0
    old, body = _text(data[1 : 1 + cut]), _text(data[1 + cut :])
    try:
        edits = replace_text_edits(body, old, "Z", 1)
    except BridgeError:
        return
    assert len(edits) == 1 and body[edits[0].start : edits[0].end] == old


def fuzz_render(data: bytes) -> None:
    """The one renderer on arbitrary Markdown."""
    render_html(_text(data))


TARGETS = {
    "md_changeset_json": fuzz_changeset_json,
    "md_changeset_bytes": fuzz_changeset_bytes,
    "md_collab_sequence": fuzz_collab_sequence,
    "md_offsets": fuzz_offsets,
    "md_edit_ranges": fuzz_edit_ranges,
    "md_file_bytes": fuzz_file_bytes,
    "md_front_matter": fuzz_front_matter,
    "md_outline_sections": fuzz_outline_and_sections,
    "md_replace_text": fuzz_replace_text,
    "md_render": fuzz_render,
}

SEEDS = {
    "md_changeset_json": [b'[3, [1, "x", "y"], 40]', b"[[0]]", b'[{"a":1}]', b"[58]"],
    "md_front_matter": [b"title: x\ntags: [a, b]", b"a: [", b"- 1\n- 2", b"!!python/object:os.system ls"],
    "md_outline_sections": [_BASE.encode(), b"Setext\n===\n\n```\n# no\n```\n# yes\n"],
    "md_render": [_BASE.encode(), b"$x$ $$y$$ [^1]\n\n[^1]: n\n| a |\n|---|\n| b |\n"],
}
