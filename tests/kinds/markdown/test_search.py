"""md_search as a writer uses it: across the folder, unsaved text included, regex and whole words, pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.markdown.search import Query, search_files


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    (tmp_path / "a.md").write_text("cat\ncatalog 😀 cat\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("Cat food\n", encoding="utf-8")
    return [tmp_path / "a.md", tmp_path / "b.md"]


def run(files, query, live=None, **kw):
    return search_files(files, query, live_text=live or (lambda p: None), relative=lambda p: p.name, **kw)


def test_case_insensitive_by_default_with_line_and_column(files):
    res = run(files, Query("cat"))
    assert [(m["path"], m["line"], m["column"]) for m in res["matches"]] == [
        ("a.md", 1, 1),
        ("a.md", 2, 1),
        ("a.md", 2, 11),
        ("b.md", 1, 1),
    ]


def test_whole_word_and_regex(files):
    assert len(run(files, Query("cat", whole_word=True, case_sensitive=True))["matches"]) == 2
    assert [m["preview"] for m in run(files, Query(r"cat\w+", regex=True))["matches"]] == ["catalog 😀 cat"]
    with pytest.raises(BridgeError) as err:
        run(files, Query("(", regex=True))
    assert err.value.code is ErrorCode.INVALID_ARGUMENT


def test_open_documents_are_searched_in_their_unsaved_text(files):
    res = run(files, Query("dog"), live=lambda p: ("d1", "hot dog") if p.name == "b.md" else None)
    assert res["matches"][0]["docId"] == "d1"


def test_pages_follow_the_cursor_and_a_foreign_cursor_is_refused(files):
    first = run(files, Query("cat"), limit=3)
    second = run(files, Query("cat"), limit=3, cursor=first["nextCursor"])
    assert len(first["matches"]) == 3 and len(second["matches"]) == 1 and second["nextCursor"] is None
    with pytest.raises(BridgeError):
        run(files, Query("dog"), cursor=first["nextCursor"])


def test_a_cancelled_search_stops_and_a_slow_pattern_is_bounded(tmp_path):
    """The caller went away (`cancel` set by md_search when its task is cancelled) / a catastrophic pattern."""
    import threading

    files = []
    for n in range(3):
        path = tmp_path / f"f{n}.md"
        path.write_text(("a" * 30 + "!\n") * 50, "utf-8")
        files.append(path)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(BridgeError, match="cancelled"):
        search_files(files, Query("a", regex=True), live_text=lambda p: None, relative=str, cancel=cancel)
    with pytest.raises(BridgeError, match=r"longer than 0\.3 s"):
        search_files(
            files, Query("(a|aa)+$", regex=True), live_text=lambda p: None, relative=str, time_limit_s=0.3
        )
