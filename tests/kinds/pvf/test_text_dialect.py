"""The shared script text dialect: tokens, floats, strings, links, comments, layout, and syntax errors."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.script import text as d
from deskbridge.kinds.pvf.script.text import Kind


def bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.5, "0.5"),
        (8000.0, "8000.0"),
        (0.1, "0.1"),
        (-2.5, "-2.5"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (123456.789, "123456.79"),
        (3.4e38, "3.4e+38"),
        (1e-10, "1.0e-10"),
    ],
)
def test_floats_print_shortest_with_a_mandatory_dot(value, text):
    assert d.format_float32(bits(value)) == text
    assert d.parse_float32(text) == bits(value)


def test_non_finite_floats_have_no_decimal_text():
    assert d.format_float32(0x7F800000) is None
    assert d.format_float32(0x7FC00001) is None


@given(st.integers(0, 0xFFFFFFFF))
def test_every_finite_float32_round_trips_through_text(b):
    text = d.format_float32(b)
    if text is None:
        return
    assert "." in text
    (tok,) = d.lex(text)
    assert tok.kind is Kind.FLOAT and tok.value == b


def test_lexes_every_token_kind():
    src = (
        "#PVF_File\n[name]\t<3::name_1`破舊``短劍`>\n{3=5}\t{6=`up`}\t-7\t1.5\t`a``b`\tword\t[/name] # tail\n"
    )
    toks = d.lex(src)
    assert [t.kind for t in toks] == [
        Kind.SECTION,
        Kind.LINK,
        Kind.TYPED,
        Kind.TYPED,
        Kind.INT,
        Kind.FLOAT,
        Kind.STRING,
        Kind.WORD,
        Kind.SECTION,
    ]
    assert toks[1].link_id == 3 and toks[1].value == "name_1" and toks[1].link_text == "破舊`短劍"
    assert toks[2] == d.typed_token(3, 5) and toks[3] == d.typed_token(6, "up")
    assert toks[6].value == "a`b"


def test_strings_span_lines_and_keep_crlf():
    (tok,) = d.lex("`line one\r\nline two`")
    assert tok.value == "line one\r\nline two"


def test_spaces_separate_tokens_like_tabs():
    assert d.lex("1 2\t3\n4") == [d.int_token(i) for i in (1, 2, 3, 4)]


@pytest.mark.parametrize(
    ("src", "line", "col"),
    [
        ("1\n  `open", 2, 3),
        ("[abc", 1, 1),
        ("{3=}", 1, 1),
        ("<1::k>", 1, 1),
        ("2147483648", 1, 1),
        ("1.0e99", 1, 1),
        ("{300=1}", 1, 1),
    ],
)
def test_syntax_errors_name_line_and_column(src, line, col):
    with pytest.raises(BridgeError) as err:
        d.lex(src)
    assert err.value.code == "SCRIPT_SYNTAX"
    assert (err.value.data["line"], err.value.data["column"]) == (line, col)


def test_unterminated_string_is_linear_not_a_hang():
    with pytest.raises(BridgeError):
        d.lex("`" + "a" * 200_000)


def test_layout_nests_paired_sections_and_breaks_before_strings():
    toks = [
        d.section_token("[if equip]"),
        d.string_token("[physical attack]"),
        d.int_token(10),
        d.string_token("[magical attack]"),
        d.int_token(-5),
        d.section_token("[/if equip]"),
        d.section_token("[price]"),
        d.int_token(8000),
    ]
    assert d.print_tokens(toks, header="#PVF_File") == (
        "#PVF_File\n\n[if equip]\n\t`[physical attack]`\t10\n\t`[magical attack]`\t-5\n\n[/if equip]\n\n"
        "[price]\n\t8000\n"
    )


def test_record_width_lays_out_registries():
    toks = [d.int_token(1), d.string_token("a.equ"), d.int_token(2), d.string_token("b.equ")]
    assert d.print_tokens(toks, record_width=2) == "1\t`a.equ`\n2\t`b.equ`\n"


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_tokens = st.one_of(
    st.integers(d.INT32_MIN, d.INT32_MAX).map(d.int_token),
    st.integers(0, 0xFFFFFFFF).filter(lambda b: d.format_float32(b) is not None).map(d.float_token),
    _text.map(d.string_token),
    _text.filter(lambda s: d.is_section_text("[" + s + "]")).map(lambda s: d.section_token("[" + s + "]")),
    st.tuples(st.integers(0, 255), st.one_of(st.integers(d.INT32_MIN, d.INT32_MAX), _text)).map(
        lambda p: d.typed_token(*p)
    ),
    st.tuples(st.integers(0, d.INT32_MAX), _text.filter(d.is_link_key), _text).map(
        lambda p: d.link_token(*p)
    ),
    _text.filter(d.is_word).map(d.word_token),
)


@settings(max_examples=300)
@given(st.lists(_tokens, max_size=30), st.sampled_from([None, 2, 3]))
def test_print_then_lex_gives_the_same_tokens(tokens, width):
    assert d.lex(d.print_tokens(tokens, header="#PVF_File", record_width=width)) == tokens


_PIECES = st.sampled_from(
    ["`", "``", "[", "]", "[a b]", "[/a]", "{", "}", "{4=12}", "{300=1}", "{5=`x`}", "<", ">", "<3::k`t`>",
     "<99999999999::k`t`>", "::", "#", "# c\n", "\n", " ", "\t", "\r\n", "12", "-5", "+7", "2147483648",
     "-2147483649", "1.5", ".5", "5.", "1e5", "1.0e+40", "abc", "x`y", "a#b", "é", "\u3000", "0"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=14).map("".join))
def test_lex_reads_the_tokens_token_re_matches_one_at_a_time(src):
    """`lex` takes the whitespace and comments before a token in the same match (one match per token): the
    tokens it reads start exactly where `TOKEN_RE`, matching one piece at a time, finds a token — or it raises
    where `TOKEN_RE` finds a character that starts no token."""
    starts, bad = [], None
    for m in d.TOKEN_RE.finditer(src):
        if m.lastgroup == "bad":
            bad = m.start()
            break
        if m.lastgroup not in ("ws", "comment"):
            starts.append(m.start())
    try:
        tokens = d.lex(src)
    except BridgeError as exc:
        assert exc.data["offset"] in [*starts, bad]
        return
    assert bad is None and [t.pos for t in tokens] == starts
