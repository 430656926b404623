"""Property tests: whatever a browser or a tool sends, UiState either applies it whole or refuses it whole with
a BridgeError, and preview windows always cover what was asked for, cut at block edges."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.markdown.ui_state import LANGUAGES, THEMES, TYPOGRAPHIES, UiState, default_state
from deskbridge.kinds.markdown.views import BLOCK_SEARCH_MAX_LINES, block_window

FIELDS = [*default_state(), "revision", "fontSize", "", "theme "]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=12),
    st.sampled_from([*THEMES, *TYPOGRAPHIES, *LANGUAGES, "files", "outline"]),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=6))
def test_ui_state_updates_are_all_or_nothing(changes):
    published = []
    state = UiState(events=type("Bus", (), {"publish": lambda self, t, d: published.append(d)})())
    before = state.snapshot()
    try:
        after = state.update(changes)
    except BridgeError:
        assert state.snapshot() == before and published == []
        return
    for key, value in changes.items():
        if key != "revision":
            assert after[key] == value or str(after[key]).casefold() == str(value).strip().casefold()
    assert len(published) == (1 if after["revision"] > before["revision"] else 0)


LINES = st.lists(
    st.sampled_from(["", "text", "```", "~~~", "   ```py", "- item", "| a |", "# h"]),
    min_size=1,
    max_size=120,
)


@settings(max_examples=400, deadline=None)
@given(LINES, st.data())
def test_preview_windows_cover_the_request_and_stay_in_the_document(lines, data):
    start = data.draw(st.integers(1, len(lines)))
    end = data.draw(st.integers(start, len(lines)))
    first, last = block_window(lines, start, end)
    assert 1 <= first <= start <= end <= last <= len(lines)
    assert last - end <= BLOCK_SEARCH_MAX_LINES
