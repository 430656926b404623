"""One reading of which tags nest (`text.container_indexes`): the annotation engine's section tree and the
script model's document agree with it on mis-nested, unclosed and repeated tags."""

from __future__ import annotations

import pytest

from deskbridge.kinds.pvf.annotations import parse
from deskbridge.kinds.pvf.script.text import container_indexes, lex
from deskbridge.kinds.pvf.scripting.model import Document, walk

CASES = [
    "[a]\n1\n[box]\n[x]\n[y]\n5\n[/box]\n[a]\n3\n",
    # [b] is opened inside [a] and never closed: [/a] closes [a], [b] stays flat
    "[a]\n[b]\n1\n[/a]\n[c]\n2\n",
    # an end tag with no opener, then a repeated container
    "[/z]\n[box]\n1\n[/box]\n[box]\n[in]\n2\n[/box]\n",
    # nested same-name containers: each end tag closes the nearest open one
    "[s]\n[s]\n1\n[/s]\n2\n[/s]\n",
]


def _opened(text: str) -> list[tuple[str, bool]]:
    tokens = lex(text)
    found = container_indexes(tokens)
    # every tag but a matched end tag starts a section; an unmatched end tag is a (flat) section of its own
    return [
        (str(t.value), i in found)
        for i, t in enumerate(tokens)
        if t.kind == "section" and not (t.is_end_tag and i in found)
    ]


@pytest.mark.parametrize("text", CASES)
def test_engine_and_model_nest_like_container_indexes(text: str) -> None:
    want = [(tag[1:-1], closed) for tag, closed in _opened(text)]
    _, order = parse(text)
    assert [(s.name, s.container) for s in order] == want
    doc = Document(lex(text), header=None, record_width=None)
    got = [(s.name, s.has_end) for s in walk(doc.root)]
    assert got == want
    assert doc.text() == Document(lex(doc.text()), header=None, record_width=None).text()
