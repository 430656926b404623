"""The collab authority: CodeMirror change JSON in UTF-16, version checks, rebasing, and no lost characters."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.markdown.collab import (
    CollabDocument,
    Edit,
    apply_edits,
    changes_to_edits,
    edits_to_changes,
    map_position,
    map_range,
)


def test_codemirror_change_json_with_an_emoji_is_counted_in_utf16():
    doc = CollabDocument("a😀b")
    # keep "a😀" (3 UTF-16 units), insert two lines, delete "b"
    assert doc.push(0, [{"clientID": "tab1", "changes": [3, [1, "x", "y"]]}])
    assert doc.text == "a😀x\ny"
    assert doc.version == 1


def test_push_on_an_old_version_is_refused_and_changes_nothing():
    doc = CollabDocument("hello")
    assert doc.push(0, [{"clientID": "a", "changes": [5, [0, "!"]]}])
    assert not doc.push(0, [{"clientID": "b", "changes": [[1, "J"], 4]}])
    assert doc.text == "hello!"


def test_malformed_or_wrong_length_change_sets_are_refused_before_anything_applies():
    doc = CollabDocument("abc")
    for bad in ([2], [4], [[4]], "x", [[1, 5]], [True, 2], [[1, "a\nb"], 2], [-1, 4]):
        with pytest.raises(BridgeError) as err:
            doc.push(0, [{"clientID": "t", "changes": bad}])
        assert err.value.code is ErrorCode.INVALID_ARGUMENT
    with pytest.raises(BridgeError):
        doc.push(0, [{"clientID": "t", "changes": [[1, "X"], 2]}, {"clientID": "t", "changes": [99]}])
    assert doc.text == "abc" and doc.version == 0


def test_browser_cannot_pretend_to_be_an_ai_client():
    doc = CollabDocument("abc")
    with pytest.raises(BridgeError) as err:
        doc.push(0, [{"clientID": "mcp:claude", "changes": [3]}])
    assert err.value.code is ErrorCode.ACCESS_DENIED


def test_server_edits_become_updates_the_browser_can_pull():
    doc = CollabDocument("# Title\n\nbody 😀 end\n")
    start = doc.text.index("end")
    update = doc.apply("mcp:claude", [Edit(start, start + 3, "fin")])
    assert update.to_wire() == {"clientID": "mcp:claude", "changes": [17, [3, "fin"], 1]}
    pulled = asyncio.run(doc.pull(0, timeout=0))
    assert [u.client_id for u in pulled] == ["mcp:claude"]


def test_pull_waits_for_the_next_update():
    async def scenario():
        doc = CollabDocument("x")
        waiter = asyncio.create_task(doc.pull(0, timeout=5))
        await asyncio.sleep(0.01)
        assert not waiter.done()
        doc.apply("mcp:a", [Edit(1, 1, "y")])
        return await waiter

    assert len(asyncio.run(scenario())) == 1


def test_old_versions_beyond_the_kept_log_must_resync():
    doc = CollabDocument("", log_max=3)
    for i in range(5):
        doc.apply("mcp:a", [Edit(i, i, "x")])
    with pytest.raises(BridgeError) as err:
        doc.updates_since(1)
    assert err.value.data["resync"] is True
    assert len(doc.updates_since(2)) == 3


def test_map_position_and_ranges():
    edits = [Edit(2, 4, "XYZ"), Edit(6, 6, "++")]
    assert map_position(1, edits) == 1
    assert map_position(3, edits) is None
    assert map_position(5, edits) == 6
    assert map_position(6, edits, assoc=-1) == 7
    assert map_position(6, edits, assoc=1) == 9
    assert map_range(4, 6, edits) == (5, 7)
    assert map_range(0, 3, edits) is None


texts = st.text(alphabet=st.sampled_from([*list("ab\n中"), "😀"]), max_size=30)


@st.composite
def text_and_edits(draw):
    text = draw(texts)
    points = sorted(draw(st.lists(st.integers(0, len(text)), max_size=6)))
    edits, i = [], 0
    while i + 1 < len(points):
        edits.append(Edit(points[i], points[i + 1], draw(texts)))
        i += 2
    return text, edits


@settings(deadline=None)  # shared CI machines: no per-example time limit
@given(text_and_edits())
def test_edits_round_trip_through_codemirror_json(case):
    text, edits = case
    changes = edits_to_changes(edits, text)
    back = changes_to_edits(changes, text)
    assert apply_edits(text, back) == apply_edits(text, edits)


# --- concurrency: a typing browser, an AI editing from stale revisions, nothing lost -------------------


class Browser:
    """A CodeMirror-like client: local insertions wait to be confirmed and are rebased over pulled updates."""

    def __init__(self, doc: CollabDocument, name: str) -> None:
        self.doc, self.name = doc, name
        self.version = doc.version
        self.confirmed = doc.text
        self.pending: list[
            tuple[int, str]
        ] = []  # insertions in coordinates of the confirmed text + earlier pending

    @property
    def view(self) -> str:
        text = self.confirmed
        for pos, s in self.pending:
            text = text[:pos] + s + text[pos:]
        return text

    def type(self, where: int, s: str) -> None:
        view = self.view
        self.pending.append((min(where, len(view)), s))

    def sync(self) -> None:
        while self.pending:
            base = self.confirmed
            updates = []
            for pos, s in self.pending:
                updates.append(
                    {"clientID": self.name, "changes": edits_to_changes([Edit(pos, pos, s)], base)}
                )
                base = base[:pos] + s + base[pos:]
            if self.doc.push(self.version, updates):
                self.confirmed, self.version, self.pending = base, self.doc.version, []
                return
            self.receive()

    def receive(self) -> None:
        for update in self.doc.updates_since(self.version):
            edits = list(update.edits)
            self.confirmed = apply_edits(self.confirmed, edits)
            rebased, mapped = [], edits
            for pos, s in self.pending:
                new = map_position(pos, mapped, assoc=-1)
                if new is None:  # inside a replaced span: keep the typing at the span's start
                    new = map_position(next(e.start for e in mapped if e.start < pos < e.end), mapped)
                rebased.append((new, s))
                mapped = [*_shift(mapped, pos, len(s))]
            self.pending = rebased
            self.version += 1


def _shift(edits, at, n):
    for e in edits:
        if e.start >= at:
            yield Edit(e.start + n, e.end + n, e.insert)
        else:
            yield e


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_concurrent_browser_typing_and_ai_edits_never_lose_a_character(data):
    original = "The quick brown fox\njumps over 😀 the lazy dog\n"
    doc = CollabDocument(original)
    browser = Browser(doc, "tab")
    typed = []
    seen_versions = [0]
    for step in range(data.draw(st.integers(1, 12))):
        action = data.draw(st.sampled_from(["type", "sync", "ai", "receive"]))
        if action == "type":
            marker = chr(0x4E00 + step)  # one character, so later typing cannot split it
            browser.type(data.draw(st.integers(0, len(browser.view))), marker)
            typed.append(marker)
        elif action == "sync":
            browser.sync()
        elif action == "receive":
            browser.receive()
        else:
            # the AI replaces a word of the original text, based on some revision it saw earlier
            base = data.draw(st.sampled_from(seen_versions))
            word = data.draw(st.sampled_from(["quick", "brown", "lazy", "dog"]))
            base_text = _text_at(doc, original, base)
            at = base_text.find(word)
            if at == -1:
                continue
            edits = [Edit(at, at + len(word), word.upper())]
            try:
                for later in doc.edits_since(base):
                    r = map_range(edits[0].start, edits[0].end, later)
                    if r is None:
                        raise BridgeError(ErrorCode.STALE_WORKSPACE, "touched")
                    edits = [Edit(r[0], r[1], word.upper())]
                doc.apply("mcp:ai", edits)
            except BridgeError:
                pass
        seen_versions.append(doc.version)
    browser.sync()
    browser.receive()
    assert browser.view == doc.text
    for marker in typed:
        assert marker in doc.text


def _text_at(doc: CollabDocument, original: str, version: int) -> str:
    text = original
    for update in doc.updates_since(0)[:version]:
        text = apply_edits(text, list(update.edits))
    return text


# --- a big AI replacement becomes line hunks, so unchanged lines stay retained (REL-COLLAB) ---------------

import itertools  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from deskbridge.kinds.markdown.collab import apply_edits as _apply  # noqa: E402
from deskbridge.kinds.markdown.edits import minimal_edits, refine_edits  # noqa: E402

_TEXT = st.text(alphabet=st.sampled_from(["a", "b", "\n", "中", "😀", " "]), max_size=80)


@settings(max_examples=500, deadline=None)
@given(old=_TEXT, new=_TEXT, at=st.integers(0, 5))
def test_minimal_edits_give_the_new_text_and_are_ordered(old, new, at):
    edits = minimal_edits(old, new, at)
    assert _apply("x" * at + old, edits) == "x" * at + new
    assert all(a.end <= b.start for a, b in itertools.pairwise(edits))


def test_a_whole_document_replacement_leaves_unchanged_lines_alone():
    old = "# T\n\n" + "".join(f"line {n}\n" for n in range(50)) + "end\n"
    new = "# Title\n\n" + "".join(f"line {n}\n" for n in range(50)) + "the end\n"
    edits = refine_edits(old, [Edit(0, len(old), new)])
    assert _apply(old, edits) == new
    touched = sum(e.end - e.start for e in edits)
    assert len(edits) == 2 and touched <= 4, edits  # "T" → "Title" and "end" → "the end"
