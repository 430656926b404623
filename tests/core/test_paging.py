"""core.paging: the one cursor format; a cursor we cannot use is an error that says how to restart."""

from __future__ import annotations

import pytest

from deskbridge.core import paging
from deskbridge.core.errors import BridgeError, ErrorCode


def test_pages_cover_every_item_once():
    items = list(range(23))
    seen, cursor = [], None
    while True:
        chunk, cursor, _start = paging.page(items, cursor, 5, tool="x_list", bound={"q": "a"})
        seen += chunk
        if cursor is None:
            break
    assert seen == items


@pytest.mark.parametrize("bad", ["7", "not a cursor!", "e30", "W10", paging.encode_cursor({"o": -1})])
def test_a_bad_cursor_never_restarts_at_page_one(bad):
    with pytest.raises(BridgeError) as info:
        paging.page(list(range(10)), bad, 3, tool="md_search")
    assert info.value.code is ErrorCode.INVALID_ARGUMENT
    assert "md_search" in info.value.hint and "without cursor" in info.value.hint


def test_a_cursor_of_another_request_or_past_the_end_is_refused():
    _chunk, cursor, _ = paging.page(list(range(10)), None, 3, bound={"q": "cat"})
    with pytest.raises(BridgeError, match="another request"):
        paging.page(list(range(10)), cursor, 3, bound={"q": "dog"})
    far = paging.offset_cursor(50)
    with pytest.raises(BridgeError, match="past the end"):
        paging.page(list(range(10)), far, 3)


def test_no_cursor_is_the_first_page_and_state_round_trips():
    assert paging.offset_of(None) == 0 and paging.offset_of("") == 0
    state = {"q": "中文", "o": 3, "f": [1, 2]}
    assert paging.decode_cursor(paging.encode_cursor(state)) == state
