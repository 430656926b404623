"""Fuzzing of the engine's parsers of caller input: paths, preview cursors, log cursors, identities.

Every input must give a result or a typed `BridgeError` — never another exception, never an escape.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from deskbridge.core.errors import BridgeError
from deskbridge.core.files import FileIdentity
from deskbridge.core.paths import resolve_path, safe_relative_path
from deskbridge.core.plans import PlanBook, PlanKind, make_change
from deskbridge.core.tasks import LogRing

_ROOT = Path(tempfile.mkdtemp(prefix="deskbridge-fuzz-")) / "root"
(_ROOT / "sub").mkdir(parents=True)
(_ROOT.parent / "outside").mkdir()
(_ROOT / "out").symlink_to(_ROOT.parent / "outside")
_REAL_ROOT = _ROOT.resolve()
atexit.register(shutil.rmtree, _ROOT.parent, True)

PIECES = st.sampled_from(
    [
        "..",
        ".",
        "sub",
        "out",
        "a",
        "CON",
        "nul.txt",
        "",
        "C:",
        "\\\\",
        "//",
        "\x00",
        "é",
        "x" * 300,
        ":",
        "~",
        "$",
        " ",
        "...",
        "\\..\\",
        "/..",
        str(_ROOT),
        "root_evil",
    ]
)
PATHS = st.one_of(
    st.text(max_size=80),
    st.lists(PIECES, max_size=8).map("/".join),
    st.lists(PIECES, max_size=8).map("\\".join),
)


@settings(max_examples=1500, deadline=None)
@given(PATHS)
def test_resolve_path_never_escapes_and_only_raises_bridge_errors(raw):
    try:
        got = resolve_path(raw, [_ROOT])
    except BridgeError:
        return
    assert got == _REAL_ROOT or got.is_relative_to(_REAL_ROOT), (raw, got)


@settings(max_examples=1000, deadline=None)
@given(PATHS)
def test_safe_relative_path_result_is_clean(raw):
    try:
        rel = safe_relative_path(raw)
    except BridgeError:
        return
    parts = rel.split("/")
    assert all(p not in ("", ".", "..") for p in parts) and not rel.startswith("/")
    assert "\\" not in rel and "\x00" not in rel


_BOOK = PlanBook()
_PLAN = _BOOK.create(
    PlanKind.SCRIPT,
    owner="ui",
    workspace_id="ws-1",
    revision=1,
    changes=[make_change(f"k{i}", None, "v") for i in range(5)],
)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=60), st.binary(max_size=60).map(lambda b: b.hex())))
def test_any_preview_cursor_gives_a_page_or_invalid_argument(cursor):
    try:
        page = _BOOK.preview(_PLAN, cursor, 2)
    except BridgeError:
        return
    assert len(page["items"]) <= 2


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_any_log_cursor_gives_a_page_or_invalid_argument(cursor):
    ring = LogRing()
    ring.append("x")
    with contextlib.suppress(BridgeError):
        ring.read(cursor)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["device", "inode", "size", "mtime_ns", "sha256", "x"]),
        st.one_of(st.integers(), st.text(max_size=5), st.none(), st.lists(st.integers())),
    )
)
def test_any_identity_object_parses_or_is_invalid(data):
    with contextlib.suppress(BridgeError):
        FileIdentity.from_dict(data)
