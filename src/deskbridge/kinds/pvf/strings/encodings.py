"""Pack text encodings for classic archives, their auto-detection, and the Korean CP437 mojibake round trip.

pvfUtility offers TW=cp950 (default), CN=cp936, KR=cp949, JP=cp932, UTF-8 (research/pvf.md §2A
"Encodings"); paths are always CP949. Detection scores the strings of `stringtable.bin` per candidate
(pvf-parser-ts does the same with a printable/CJK ratio): strings that fail to decode cost a lot, and each
decoded CJK character earns a point when it sits in the candidate's *common-character* block — Big5 level 1
(0xA440-0xC67E) for cp950, GB2312 level 1 (0xB0A1-0xD7FE) for cp936, the KS X 1001 Hangul block for cp949,
kana for cp932 — plus a bonus for the most frequent characters of that language. Bytes of one encoding read
with another mostly land outside those blocks, which is what separates TW from CN (the main source of false
"corruption" reports, research §2A).
"""

from __future__ import annotations

import codecs
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from deskbridge.core.errors import BridgeError, ErrorCode

WINDOWS_950 = "windows-950"
"""Microsoft's code page 950, the Traditional Chinese code page the game client and iconv use.

Python's `cp950` codec is Big5 with the ETEN extensions: it also maps 0xC6A1–0xC7FC (kana, circled and
parenthesised digits, Cyrillic: ヾ々あいう①②…). Microsoft's table (unicode.org
`VENDORS/MICSFT/WINDOWS/CP950.TXT`) has nothing there — GNU libiconv's `cp950.h` documents the omission —
so text written with those codes shows as U+FFFD in every other tool. Everything else of Python's `cp950`
is Microsoft's table (the CP950.TXT changes to Big5 at 0xA145, 0xA14E, 0xA1C3 …, the 0xF9D6–0xF9FE row and
the euro sign at 0xA3E1 are already in it), so this codec is Python's minus that range, both ways."""

WINDOWS_936 = "windows-936"
"""Microsoft's code page 936 (GBK): Python's `gbk` (alias `cp936`) plus the single byte 0x80 ↔ € that
Windows defines (unicode.org `VENDORS/MICSFT/WINDOWS/CP936.TXT`, `0x80 0x20AC`; Python's `gbk` refuses
both ways). GBK's other Windows points (0xA1A4 = U+00B7, 0xA1AA = U+2014) are already Python's."""

GB18030 = "gb18030"
"""GB 18030, the superset of GBK that mainland Chinese packs use for characters GBK lacks (CJK extensions A
and B, e.g. 㐀 U+3400 = 81 39 EE 39, 𠮷 U+20BB7 = 95 34 B2 35): four-byte sequences `[81-FE][30-39][81-FE]
[30-39]` (GB 18030-2005 §6), which no two-byte code page here can start (their trail bytes are ≥ 0x40).
It reads every GBK byte pair as GBK does, so it is chosen only for bytes that need it (`detect_encoding`)."""

PATH_ENCODING = "cp949"
DEFAULT_ENCODING = WINDOWS_950

ALIASES: dict[str, str] = {
    "tw": WINDOWS_950,
    "big5": WINDOWS_950,
    "cp950": WINDOWS_950,
    "950": WINDOWS_950,
    "ms950": WINDOWS_950,
    "windows-950": WINDOWS_950,
    "cn": WINDOWS_936,
    "gbk": WINDOWS_936,
    "gb2312": WINDOWS_936,
    "cp936": WINDOWS_936,
    "936": WINDOWS_936,
    "windows-936": WINDOWS_936,
    "gb18030": GB18030,
    "kr": "cp949",
    "euc-kr": "cp949",
    "euckr": "cp949",
    "cp949": "cp949",
    "949": "cp949",
    "jp": "cp932",
    "sjis": "cp932",
    "shift_jis": "cp932",
    "cp932": "cp932",
    "932": "cp932",
    "utf8": "utf-8",
    "utf-8": "utf-8",
    "65001": "utf-8",
}
CANDIDATES: tuple[str, ...] = (WINDOWS_950, WINDOWS_936, "cp949", "cp932", "utf-8")
"""The code pages a classic pack may use. Python's cp949 (Unified Hangul Code) and cp932 are Microsoft's
tables for the characters they can write (`tests/kinds/pvf/test_code_pages.py` checks the points where the
national standards and Windows differ); 950 and 936 need codecs of their own (`WINDOWS_950`,
`WINDOWS_936`)."""


_FOUR_BYTE_GB = re.compile(rb"[\x81-\xfe][\x30-\x39][\x81-\xfe][\x30-\x39]")


def _needs_gb18030(raw: bytes) -> bool:
    """True when `raw` holds a GB18030 four-byte sequence that windows-936 cannot read, and reads as GB18030."""
    if _FOUR_BYTE_GB.search(raw) is None:
        return False
    text = raw.rstrip(b"\0")
    try:
        text.decode(WINDOWS_936)
    except UnicodeDecodeError:
        pass
    else:
        return False
    try:
        text.decode(GB18030)
    except UnicodeDecodeError:
        return False
    return True


def _eten_950() -> str:
    chars = []
    for code in range(0xC6A1, 0xC7FD):
        try:
            chars.append(code.to_bytes(2, "big").decode("cp950"))
        except UnicodeDecodeError:
            continue
    return "".join(chars)


ETEN_950 = _eten_950()
"""The 249 characters Python's cp950 puts at 0xC6A1–0xC7FC and Windows code page 950 cannot hold."""
_ETEN_RE = re.compile("[" + re.escape(ETEN_950) + "]")
_DBCS_950 = re.compile(rb"[\x81-\xfe][\x40-\x7e\xa1-\xfe]|[\s\S]")
_ETEN_REASON = "not in Windows code page 950 (an ETEN extension of Big5 that other tools do not read)"


def _is_eten_code(pair: bytes) -> bool:
    return len(pair) == 2 and ((pair[0] == 0xC6 and pair[1] >= 0xA1) or (pair[0] == 0xC7 and pair[1] <= 0xFC))


def _encode_950(text: str, errors: str = "strict") -> tuple[bytes, int]:
    m = _ETEN_RE.search(text)
    if errors == "strict":
        if m is not None:
            raise UnicodeEncodeError(WINDOWS_950, text, m.start(), m.end(), _ETEN_REASON)
        try:
            return text.encode("cp950"), len(text)
        except UnicodeEncodeError as exc:
            raise UnicodeEncodeError(WINDOWS_950, text, exc.start, exc.end, exc.reason) from None
    out, pos = [], 0
    handler = codecs.lookup_error(errors)
    while m is not None:
        out.append(text[pos : m.start()].encode("cp950", errors))
        rep, pos = handler(UnicodeEncodeError(WINDOWS_950, text, m.start(), m.end(), _ETEN_REASON))
        out.append(rep if isinstance(rep, bytes) else rep.encode("cp950", errors))
        m = _ETEN_RE.search(text, pos)
    out.append(text[pos:].encode("cp950", errors))
    return b"".join(out), len(text)


def _decode_950(data: bytes, errors: str = "strict") -> tuple[str, int]:
    data = bytes(data)
    try:
        text = data.decode("cp950", errors)
    except UnicodeDecodeError as exc:
        raise UnicodeDecodeError(WINDOWS_950, data, exc.start, exc.end, exc.reason) from None
    if _ETEN_RE.search(text) is None:
        return text, len(data)
    # Slow path (the bytes hold ETEN codes): walk the double-byte pairs and treat those codes as errors.
    out, start = [], 0
    handler = codecs.lookup_error(errors)
    for m in _DBCS_950.finditer(data):
        if _is_eten_code(m.group()):
            out.append(data[start : m.start()].decode("cp950", errors))
            rep, start = handler(UnicodeDecodeError(WINDOWS_950, data, m.start(), m.end(), _ETEN_REASON))
            out.append(rep)
    out.append(data[start:].decode("cp950", errors))
    return "".join(out), len(data)


_DBCS_936 = re.compile(rb"[\x81-\xfe][\x40-\x7e\x80-\xfe]|[\s\S]")


def _encode_936(text: str, errors: str = "strict") -> tuple[bytes, int]:
    out, start = [], 0
    for piece in text.split("€"):
        try:
            out.append(piece.encode("gbk", errors))
        except UnicodeEncodeError as exc:
            raise UnicodeEncodeError(
                WINDOWS_936, text, start + exc.start, start + exc.end, exc.reason
            ) from None
        start += len(piece) + 1
    return b"\x80".join(out), len(text)


def _decode_936(data: bytes, errors: str = "strict") -> tuple[str, int]:
    data = bytes(data)
    # a lone 0x80 (not a trail byte) is the euro sign; finding it needs the double-byte boundaries
    cuts = [m.start() for m in _DBCS_936.finditer(data) if m.group() == b"\x80"] if b"\x80" in data else []
    out, start = [], 0
    for cut in [*cuts, len(data)]:
        try:
            out.append(data[start:cut].decode("gbk", errors))
        except UnicodeDecodeError as exc:
            raise UnicodeDecodeError(
                WINDOWS_936, data, start + exc.start, start + exc.end, exc.reason
            ) from None
        start = cut + 1
    return "€".join(out), len(data)


_CODECS = {
    "windows_950": codecs.CodecInfo(_encode_950, _decode_950, name=WINDOWS_950),
    "windows_936": codecs.CodecInfo(_encode_936, _decode_936, name=WINDOWS_936),
}


def _search(name: str) -> codecs.CodecInfo | None:
    return _CODECS.get(name.replace("-", "_"))


codecs.register(_search)


_AT_MOST_TWO_BYTES = frozenset(
    {"ascii", "iso8859-1", "cp1252", "cp949", "euc_kr", "gbk", "big5", "cp950", "shift_jis", "cp932"}
    | {WINDOWS_950, WINDOWS_936}
)
"""Codecs (by `codecs.lookup` name) whose characters are one or two bytes, the first telling which."""


@functools.cache
def ambiguous_chars(encoding: str) -> dict[str, tuple[bytes, ...]] | None:
    """The characters `encoding` decodes from more than one byte form, with their forms (Big5's ／ and 十,
    cp950's 十 at A2CC and A451, …), where a string's bytes otherwise tell its text: two strings of different
    bytes decode (strictly) to the same text only by such characters, and a text starts with an ASCII
    character exactly when its bytes start with that byte. So a string table can compare its entries and
    find those that start with `[` by their bytes. None where that cannot be told (a codec with longer
    characters, or with too many such characters: cp932's NEC and IBM doubles).

    Checked by decoding every one- and two-byte character of the codecs whose characters are one or two
    bytes, the first byte telling which (a decode is then character by character, so two texts are equal
    exactly when their characters' forms are); UTF-8's strict decode is one-to-one by its definition
    (RFC 3629 §3: overlong forms and surrogates are invalid)."""
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        return None
    if name == "utf-8":
        return {}
    if name not in _AT_MOST_TWO_BYTES:
        return None
    # Our two code pages decode as Python's codec they build on or refuse (a few codes fewer for 950, the
    # one byte 0x80 more for 936, no second form of €): its doubles are theirs or more (a form the page
    # refuses is never the text's: callers decode a form before they trust it), and its C decoder tells
    # them in a fraction of the time (`tests/kinds/pvf/test_strings.py` checks both).
    return _doubles(_BUILT_ON.get(name, name))


_BUILT_ON = {WINDOWS_950: "cp950", WINDOWS_936: "gbk"}
AMBIGUOUS_MAX = 64
"""More characters of two forms than this: a table compares its strings by their texts."""


def _doubles(encoding: str) -> dict[str, tuple[bytes, ...]] | None:
    forms: dict[str, list[bytes]] = {}
    leads = []
    for b in range(256):
        try:
            ch = bytes([b]).decode(encoding)
        except UnicodeDecodeError:
            leads.append(b)
            continue
        if len(ch) != 1 or (ch.isascii() and ord(ch) != b):
            return None
        forms.setdefault(ch, []).append(bytes([b]))
    # Each lead's 256 pairs in one decode: "a b NUL" repeated, read with "replace", split at the NULs (no
    # pair ends in one: a trail byte is never 0x00, and NUL is always its own character). Where the split
    # does not give 256 pieces (an invalid pair swallowed a NUL), that lead's pairs one at a time.
    for a in leads:
        row = b"".join(bytes((a, b, 0)) for b in range(1, 256))
        pieces = row.decode(encoding, "replace").split("\0")[:-1]
        if len(pieces) != 255:
            pieces = [bytes((a, b)).decode(encoding, "replace") for b in range(1, 256)]
        for b, ch in enumerate(pieces, 1):
            if "\ufffd" in ch:
                if ch != "\ufffd":
                    continue  # a valid pair is one character
                try:
                    ch = bytes((a, b)).decode(encoding)
                except UnicodeDecodeError:
                    continue
            if len(ch) != 1 or ch.isascii():
                return None
            forms.setdefault(ch, []).append(bytes((a, b)))
        try:
            ch = bytes((a, 0)).decode(encoding)
        except UnicodeDecodeError:
            continue
        return None  # a pair ending in NUL
    out = {ch: tuple(got) for ch, got in forms.items() if len(got) > 1}
    return out if len(out) <= AMBIGUOUS_MAX else None


def cannot_encode(text: str, encoding: str, exc: UnicodeEncodeError, *, where: str = "text") -> BridgeError:
    """`ENCODING_MISMATCH` for a character the pack's code page cannot hold: which character, where (line
    and column in `text`), and the help that fits — change the character, not the encoding."""
    pos = exc.start
    ch = text[pos] if 0 <= pos < len(text) else "?"
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    shown = {WINDOWS_950: "Windows code page 950 (tw)", WINDOWS_936: "Windows code page 936 (cn)"}.get(
        encoding, encoding
    )
    return BridgeError(
        ErrorCode.ENCODING_MISMATCH,
        f"{where}: {ch!r} (U+{ord(ch):04X}) at line {line}, column {col} cannot be written in {shown}",
        f"Replace {ch!r} with a character the pack's code page has (the game and other tools would show "
        "it as '?' or U+FFFD), or remove it. Reopen with another -e only if the whole pack is in another "
        "encoding.",
        data={
            "encoding": encoding,
            "position": pos,
            "line": line,
            "column": col,
            "character": ch,
            "codepoint": f"U+{ord(ch):04X}",
        },
    )


def resolve_encoding(name: str) -> str:
    """Codec name for a user choice (`tw`, `CN`, `big5`, `cp949`, `utf8` …); INVALID_ARGUMENT otherwise."""
    key = name.strip().lower()
    if key in ALIASES:
        return ALIASES[key]
    raise BridgeError(
        ErrorCode.INVALID_ARGUMENT,
        f"unknown pack encoding '{name}'",
        hint="Use one of tw (Windows code page 950), cn (936), kr (949), jp (932), gb18030, utf8.",
    )


_COMMON_HANT = set(
    "的一是不了人我在有他這中大來上國個到說們為子和你地出道也時年得就那要下以生會自著去之過家學對可她裡後小麼心多天"
    "而能好都然沒日於起還發成事只作當想看文無開手十用主行方又如前所本見經頭面公同三已老從動兩長知民樣現分將外但身些與"
    "高意進把法此實回二理美點月明其種聲全工己話兒者向情部正名定女問力機給等幾很業最間新什打便位因重被走電四第門相次東"
    "裝備攻擊防禦技能體智精神魔法劍藥水級物品寶箱任務怪獸商店價格效果傷害恢復屬性強化"
)
_COMMON_HANS = set(
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天"
    "而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与"
    "高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东"
    "装备攻击防御技能体智精神魔法剑药水级物品宝箱任务怪兽商店价格效果伤害恢复属性强化"
)
_COMMON_HANGUL = set(
    "이다는의에을하고가기지서한로리사자어도있수를그대아나시것인게요니해들정주면보일전스라까만경"
)


@dataclass(frozen=True, slots=True)
class Detection:
    """The chosen encoding, every candidate's score, and whether the choice is clear."""

    encoding: str
    scores: dict[str, float]
    confident: bool


def _in_block(ch: str, codec: str, lo: int, hi: int, trail_lo: int = 0) -> bool:
    try:
        b = ch.encode(codec)
    except UnicodeEncodeError:
        return False
    if len(b) != 2:
        return False
    code = (b[0] << 8) | b[1]
    return lo <= code <= hi and b[1] >= trail_lo


def _char_score(ch: str, codec: str) -> float:
    o = ord(ch)
    if o < 0x80:
        return 0.0
    if o == 0xFFFD or 0xE000 <= o <= 0xF8FF or o < 0xA0:
        return -2.0
    if codec == WINDOWS_950:
        return (1.0 if _in_block(ch, WINDOWS_950, 0xA440, 0xC67E) else 0.0) + (
            1.0 if ch in _COMMON_HANT else 0.0
        )
    if codec in (WINDOWS_936, GB18030):
        return (1.0 if _in_block(ch, "gb2312", 0xB0A1, 0xD7FE, 0xA1) else 0.0) + (
            1.0 if ch in _COMMON_HANS else 0.0
        )
    if codec == "cp949":
        if 0xAC00 <= o <= 0xD7A3:
            return (1.0 if _in_block(ch, "euc-kr", 0xB0A1, 0xC8FE, 0xA1) else 0.0) + (
                1.0 if ch in _COMMON_HANGUL else 0.0
            )
        return 0.0
    if codec == "cp932":
        if 0x3040 <= o <= 0x30FF:
            return 2.0
        return 1.0 if ch in _COMMON_HANT or ch in _COMMON_HANS else 0.0
    if codec == "utf-8":
        return 2.0 if (0x3040 <= o <= 0x30FF or 0x4E00 <= o <= 0x9FFF or 0xAC00 <= o <= 0xD7A3) else 0.5
    return 0.0


def detect_encoding(strings: Iterable[bytes], *, limit: int = 2000) -> Detection:
    """Pick the pack encoding that makes the most of these raw strings read as plausible text.

    Only strings with bytes >= 0x80 count (ASCII reads the same everywhere); at most `limit` of them.
    With no such string the default (Windows code page 950) is returned, marked not confident.
    GB18030 is a candidate only when a string needs its four-byte sequences (`_needs_gb18030`): it reads
    every GBK pair alike, so it scores as windows-936 does plus the strings 936 cannot read, and its choice
    over 936 is certain (936 fails those strings), so confidence is judged against the others.
    """
    samples: list[bytes] = []
    for s in strings:
        if any(b >= 0x80 for b in s):
            samples.append(s)
            if len(samples) >= limit:
                break
    if not samples:
        return Detection(DEFAULT_ENCODING, dict.fromkeys(CANDIDATES, 0.0), False)
    candidates = CANDIDATES + ((GB18030,) if any(_needs_gb18030(s) for s in samples) else ())
    scores: dict[str, float] = {}
    for codec in candidates:
        total = 0.0
        chars = 0
        for raw in samples:
            try:
                text = raw.rstrip(b"\0").decode(codec)
            except UnicodeDecodeError:
                total -= 8.0
                continue
            for ch in text:
                if ord(ch) >= 0x80:
                    total += _char_score(ch, codec)
                    chars += 1
        scores[codec] = total / max(1, len(samples))
    ranked = sorted(candidates, key=lambda c: (-scores[c], candidates.index(c)))
    best = ranked[0]
    second = next(c for c in ranked[1:] if not (best == GB18030 and c == WINDOWS_936))
    confident = scores[best] > 0 and scores[best] >= 1.15 * max(scores[second], 0.0) + 0.1
    return Detection(best, scores, confident)


def mismatch_warning(encoding: str, detection: Detection) -> BridgeError | None:
    """An ENCODING_MISMATCH warning when the user's choice scores clearly worse than the detected one."""
    if detection.encoding == encoding or not detection.confident:
        return None
    mine, best = detection.scores.get(encoding, 0.0), detection.scores[detection.encoding]
    if mine >= 0.8 * best:
        return None
    return BridgeError(
        ErrorCode.ENCODING_MISMATCH,
        f"strings read poorly as {encoding}; they look like {detection.encoding}",
        data={
            "chosen": encoding,
            "detected": detection.encoding,
            "scores": {k: round(v, 3) for k, v in detection.scores.items()},
        },
    )


def fix_korean_mojibake(text: str) -> str | None:
    """EUC-KR bytes that were shown through CP437 (`╟╤▒╣` for 한국) decoded back to Korean, else None.

    Only applied when box-drawing/CP437-high characters dominate (pvfine `fixKoreanMojibake`, research §2B).
    """
    high = [ch for ch in text if ord(ch) >= 0x80]
    if len(high) < 2:
        return None
    boxy = sum(
        1
        for ch in high
        if 0x2500 <= ord(ch) <= 0x25FF
        or ch in "ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒáíóúñÑªº¿⌐¬½¼¡«»αßΓπΣσµτΦΘΩδ∞φε∩≡±≥≤⌠⌡÷≈°∙·√ⁿ²■"
    )
    if boxy < 0.6 * len(high):
        return None
    try:
        return text.encode("cp437").decode("cp949")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None


def encode_korean_mojibake(text: str) -> str:
    """The inverse of `fix_korean_mojibake`: Korean text painted back through CP437 (for writing such packs)."""
    return text.encode("cp949").decode("cp437")
