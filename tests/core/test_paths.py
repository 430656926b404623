"""REL-PATHS: the path attack corpus against `resolve_path` — 0 escapes — plus the portable-name rules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deskbridge.core import limits
from deskbridge.core import paths as paths_module
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.paths import case_collisions, is_reserved_name, resolve_path, safe_relative_path


@pytest.fixture
def sandbox(tmp_path: Path) -> dict[str, Path]:
    """A root with a file and a sub-folder, a sibling 'root_evil' folder and an outside secret."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "doc.md").write_text("doc")
    (root / "sub" / "a.txt").write_text("a")
    evil = tmp_path / "root_evil"
    evil.mkdir()
    (evil / "x.txt").write_text("evil")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    # symlinks planted inside the root that lead out of it
    (root / "link_out").symlink_to(outside)
    (root / "link_file_out").symlink_to(outside / "secret.txt")
    (root / "dangling_out").symlink_to(outside / "not-yet.txt")
    (root / "sub" / "up").symlink_to("../../outside")
    (root / "loop_a").symlink_to(root / "loop_b")
    (root / "loop_b").symlink_to(root / "loop_a")
    # a harmless link that stays inside
    (root / "link_in").symlink_to(root / "sub")
    return {"root": root, "evil": evil, "outside": outside, "tmp": tmp_path}


ESCAPES = [
    # traversal
    "../outside/secret.txt",
    "sub/../../outside/secret.txt",
    "..",
    "sub/..",
    "./../outside",
    "..\\outside\\secret.txt",
    "sub\\..\\..\\outside",
    "..//outside",
    "sub/./../../root_evil/x.txt",
    # absolute outside the root
    "/etc/passwd",
    "/",
    "{outside}/secret.txt",
    "{tmp}",
    # prefix bypass (CVE-2025-53110)
    "{root}_evil/x.txt",
    "{root}_evil",
    "{root}2",
    # symlink escapes
    "link_out/secret.txt",
    "link_out",
    "link_file_out",
    "dangling_out",
    "link_out/new-file.txt",
    "sub/up/secret.txt",
    "{root}/link_out/secret.txt",
    # device, UNC and drive forms
    "\\\\?\\C:\\Windows\\system32",
    "\\\\.\\PhysicalDrive0",
    "//?/C:/x",
    "//./pipe/x",
    "\\\\server\\share\\x",
    "//server/share/x",
    "C:\\Windows\\win.ini",
    "c:/x",
    "D:",
    "a:b",
]

INVALID = [
    "",
    "a\x00b",
    "sub/\x00",
    "x" * (limits.PATH_MAX_CHARS + 1),
    "a" * (limits.PATH_COMPONENT_MAX_BYTES + 1),
    "CON",
    "con.txt",
    "sub/NUL",
    "nul.tar.gz",
    "COM1",
    "lpt9.md",
    "AUX ",
    "CONIN$",
    "COM¹",
    "trailing.",
    "trailing ",
    "file.txt::$DATA",
    "ab:c",
    "a|b",
    "what?",
    "star*",
    "line\nbreak",
    "tab\there",
]


def fmt(case: str, s: dict[str, Path]) -> str:
    return case.format(**{k: str(v) for k, v in s.items()})


@pytest.mark.parametrize("case", ESCAPES)
def test_escape_attempt_is_refused(sandbox, case):
    with pytest.raises(BridgeError) as ei:
        resolve_path(fmt(case, sandbox), [sandbox["root"]])
    assert ei.value.code in (ErrorCode.ACCESS_DENIED, ErrorCode.INVALID_ARGUMENT)
    assert ei.value.hint


@pytest.mark.parametrize("case", INVALID)
def test_malformed_or_unportable_path_is_invalid(sandbox, case):
    with pytest.raises(BridgeError) as ei:
        resolve_path(case, [sandbox["root"]])
    assert ei.value.code == ErrorCode.INVALID_ARGUMENT


def test_loop_of_symlinks_never_resolves_inside_or_hangs(sandbox):
    try:
        got = resolve_path("loop_a/x", [sandbox["root"]])
    except BridgeError:
        return
    assert got.is_relative_to(sandbox["root"].resolve())


@pytest.mark.parametrize(
    "case, expected",
    [
        ("doc.md", "doc.md"),
        ("./doc.md", "doc.md"),
        ("sub/a.txt", "sub/a.txt"),
        ("sub\\a.txt", "sub/a.txt"),
        ("sub//a.txt", "sub/a.txt"),
        ("{root}/doc.md", "doc.md"),
        ("link_in/a.txt", "sub/a.txt"),
        ("new-file.txt", "new-file.txt"),
        ("sub/new/deeper.txt", "sub/new/deeper.txt"),
        ("Ünïcode ファイル.md", "Ünïcode ファイル.md"),
        ("CONSOLE.txt", "CONSOLE.txt"),
        ("a" * limits.PATH_COMPONENT_MAX_BYTES, "a" * limits.PATH_COMPONENT_MAX_BYTES),
    ],
)
def test_legitimate_path_resolves_inside_the_root(sandbox, case, expected):
    got = resolve_path(fmt(case, sandbox), [sandbox["root"]])
    assert got == sandbox["root"].resolve() / expected


def test_result_never_escapes_across_the_whole_corpus(sandbox):
    """REL-PATHS figure: every corpus entry either fails or resolves inside the root — 0 escapes."""
    root_real = sandbox["root"].resolve()
    escapes = []
    for case in ESCAPES + INVALID:
        try:
            got = resolve_path(fmt(case, sandbox), [sandbox["root"]])
        except BridgeError:
            continue
        if not (got == root_real or got.is_relative_to(root_real)):
            escapes.append((case, got))
    assert escapes == []


def test_second_root_allows_absolute_paths_into_it(sandbox):
    roots = [sandbox["root"], sandbox["outside"]]
    assert (
        resolve_path(f"{sandbox['outside']}/secret.txt", roots) == sandbox["outside"].resolve() / "secret.txt"
    )
    # relative paths are always taken from the first root
    with pytest.raises(BridgeError):
        resolve_path("secret.txt", roots, must_exist=True)


def test_symlinked_root_itself_is_followed(sandbox):
    alias = sandbox["tmp"] / "alias"
    alias.symlink_to(sandbox["root"])
    assert resolve_path("doc.md", [alias]) == sandbox["root"].resolve() / "doc.md"
    assert resolve_path(f"{alias}/doc.md", [sandbox["root"]]) == sandbox["root"].resolve() / "doc.md"


def test_no_roots_means_nothing_is_allowed(sandbox):
    with pytest.raises(BridgeError) as ei:
        resolve_path("doc.md", [])
    assert ei.value.code == ErrorCode.ACCESS_DENIED


def test_must_exist_reports_not_found(sandbox):
    with pytest.raises(BridgeError) as ei:
        resolve_path("missing.md", [sandbox["root"]], must_exist=True)
    assert ei.value.code == ErrorCode.NOT_FOUND


def test_path_exactly_at_the_length_limit_is_accepted(sandbox):
    root = str(sandbox["root"].resolve())
    # build an absolute path of exactly PATH_MAX_CHARS characters out of 200-byte components
    remaining = limits.PATH_MAX_CHARS - len(root)
    parts = []
    while remaining > 0:
        n = min(200, remaining - 1)
        if n <= 0:
            break
        parts.append("d" * n)
        remaining -= n + 1
    path = root + "/" + "/".join(parts)
    path += "e" * (limits.PATH_MAX_CHARS - len(path))
    assert len(path) == limits.PATH_MAX_CHARS
    assert str(resolve_path(path, [sandbox["root"]])) == path
    with pytest.raises(BridgeError):
        resolve_path(path + "e", [sandbox["root"]])


@pytest.mark.skipif(os.path.normcase("A") == "a", reason="case-sensitive file system needed to create both")
def test_new_name_differing_only_by_case_is_refused(sandbox):
    with pytest.raises(BridgeError) as ei:
        resolve_path("DOC.md", [sandbox["root"]], check_case=True)
    assert ei.value.code == ErrorCode.INVALID_ARGUMENT and "doc.md" in ei.value.message
    assert resolve_path("doc.md", [sandbox["root"]], check_case=True).name == "doc.md"
    assert resolve_path("other.md", [sandbox["root"]], check_case=True).name == "other.md"


def test_case_collisions_groups_names_equal_ignoring_case_and_unicode_form():
    names = ["Equipment/A.equ", "equipment/a.EQU", "b.txt", "Cafe\u0301.md", "CAFÉ.md", "c.txt"]
    groups = case_collisions(names)
    assert sorted(groups) == [["CAFÉ.md", "Cafe\u0301.md"], ["Equipment/A.equ", "equipment/a.EQU"]]
    assert case_collisions(["a", "b", "a"]) == []  # exact duplicates are not case collisions


@pytest.mark.parametrize("name", ["CON", "con", "Nul.txt", "com1.tar.gz", "LPT3", "aux ", "PRN.md"])
def test_reserved_names(name):
    assert is_reserved_name(name)


@pytest.mark.parametrize("name", ["CONSOLE", "nully.txt", "com10", "lpt", "a.con"])
def test_names_that_only_look_reserved(name):
    assert not is_reserved_name(name)


@pytest.mark.parametrize(
    "case, expected",
    [("equipment/a.equ", "equipment/a.equ"), ("./x/y", "x/y"), ("x\\y", "x/y")],
)
def test_safe_relative_path_normalises(case, expected):
    assert safe_relative_path(case) == expected


@pytest.mark.parametrize(
    "case", ["/abs", "../x", "x/../y", "C:/x", "x//y", "x/", "nul", "\\\\srv\\s", "a\x00"]
)
def test_safe_relative_path_refuses(case):
    with pytest.raises(BridgeError):
        safe_relative_path(case)


# -- the remembered-root fast path (MCP-LAT): the same answer as the general path, never a way out -------------

EQUIVALENCE = [
    *ESCAPES,
    *INVALID,
    "doc.md",
    "./doc.md",
    "sub",
    "sub/",
    "sub/a.txt",
    "sub//a.txt",
    "sub/a.txt/below-a-file",
    "sub/new/deeper.txt",
    "link_in/a.txt",
    "link_in/new.txt",
    "loop_a/x",
    "new-file.txt",
    ".",
    "{root}",
    "{root}/doc.md",
    "{root}/sub/a.txt",
    "{root}/link_in/a.txt",
    "{outside}/secret.txt",
    "{evil}/x.txt",
]


def _outcome(raw: str, roots: list[Path], **kw) -> tuple:
    try:
        got = resolve_path(raw, roots, **kw)
    except BridgeError as exc:
        return ("error", str(exc.code), exc.message, exc.hint, exc.data)
    return ("ok", str(got), str(got.confined_root))


@pytest.mark.security
@pytest.mark.parametrize("kw", [{}, {"must_exist": True}, {"check_case": True}])
@pytest.mark.parametrize("two_roots", [False, True])
def test_a_remembered_root_gives_the_same_answer_as_the_general_path(sandbox, kw, two_roots):
    # Real roots (as workspaces pass them), so the fast path is taken even where the temp folder is behind a link.
    real = {k: v.resolve() for k, v in sandbox.items()}
    roots = [real["root"], real["outside"]] if two_roots else [real["root"]]
    for case in EQUIVALENCE:
        raw = fmt(case, real)
        paths_module._real_roots.clear()
        general = _outcome(raw, roots, **kw)  # nothing remembered: realpath of the roots and the target
        resolve_path("doc.md", roots)  # now every root is remembered
        assert all(paths_module._known_real_root(str(r)) is not None for r in roots)
        assert _outcome(raw, roots, **kw) == general, case


@pytest.mark.security
def test_a_link_planted_after_the_root_was_remembered_is_still_refused(sandbox):
    root, outside = sandbox["root"], sandbox["outside"]
    assert resolve_path("sub/a.txt", [root]) == root / "sub" / "a.txt"
    (root / "late_link").symlink_to(outside)
    (root / "sub").rename(root / "sub-moved")
    (root / "sub").symlink_to(outside)  # a folder swapped for a link to the outside
    for raw in (
        "late_link/secret.txt",
        "late_link",
        "sub/secret.txt",
        "sub/new.txt",
        f"{root}/sub/secret.txt",
    ):
        with pytest.raises(BridgeError) as ei:
            resolve_path(raw, [root])
        assert ei.value.code == ErrorCode.ACCESS_DENIED, raw


@pytest.mark.security
def test_a_root_replaced_after_it_was_remembered_is_resolved_again(sandbox):
    root = sandbox["root"]
    assert resolve_path("doc.md", [root], must_exist=True) == root / "doc.md"
    root.rename(sandbox["tmp"] / "old-root")
    root.mkdir()
    (root / "fresh.md").write_text("fresh")
    with pytest.raises(BridgeError) as ei:
        resolve_path(
            "doc.md", [root], must_exist=True
        )  # the old folder's file is not found under the new one
    assert ei.value.code == ErrorCode.NOT_FOUND
    assert resolve_path("fresh.md", [root], must_exist=True) == root / "fresh.md"
    # And a root swapped for a link is never taken by the fast path: what it leads to is resolved in full.
    root.rename(sandbox["tmp"] / "newer-root")
    root.symlink_to(sandbox["outside"])
    assert paths_module._known_real_root(str(root)) is None
