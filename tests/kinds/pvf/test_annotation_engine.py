"""The annotation engine on script text, with a stub resolver: section tree (containers, empty tags as values,
duplicates), token targets (index, range, records, offset, context), match (extension, glob, family, variant),
UTF-16 spans for the browser, unresolved references explained."""

from __future__ import annotations

from typing import Any

from deskbridge.kinds.pvf.annotations import Annotator, RuleStore, parse
from deskbridge.kinds.pvf.annotations.engine import file_matches, str_entries
from deskbridge.kinds.pvf.annotations.rules import merge
from deskbridge.kinds.pvf.lists import Registry


class Stub:
    def __init__(self, lists: dict[str, list[tuple[int, str]]], files: set[str]) -> None:
        self.lists = lists
        self.files = files | set(lists)

    def exists(self, path: str) -> bool:
        return path in self.files

    def registry(self, list_path: str) -> Any:
        return Registry(list_path, self.lists[list_path]) if list_path in self.lists else None

    def list_base(self, list_path: str) -> str | None:
        reg = self.registry(list_path)
        return None if reg is None else reg.base_dir()

    def name_of(self, path: str, name_section: str) -> str | None:
        return f"name of {path}"

    def link_text(self, table: int, key: str) -> str | None:
        return f"text {table}/{key}"


def _rules(*rules: dict, relations: dict | None = None):  # type: ignore[no-untyped-def]
    return merge({"rules": list(rules), "relations": relations or {}}, [])


def _rule(rid: str, target: dict, ann: dict, match: dict | None = None) -> dict:
    return {"id": rid, "match": match or {}, "target": target, "annotation": ann}


def test_tree_containers_empty_tags_and_duplicates() -> None:
    text = "[a]\n1 2\n[box]\n[x]\n[y]\n5\n[/box]\n[a]\n3\n"
    root, order = parse(text)
    assert [(s.path, s.occurrence) for s in order] == [
        ("a", 1),
        ("box", 1),
        ("box/x", 1),
        ("box/y", 1),
        ("a", 2),
    ]
    box = order[1]
    # [x] is empty inside a container: a value of [box]; [y] has a value of its own: a section.
    assert [str(t.value) for t, _ in box.values()] == ["[x]"]
    assert [t.value for t, _ in order[3].values()] == [5]
    assert root.values() == []


def test_token_targets_records_offset_range_and_context() -> None:
    rs = _rules(
        _rule(
            "r.idx",
            {"kind": "token", "section": "s", "index": 1, "recordTokens": 3, "offset": 1},
            {"title": "mid", "type": "text"},
        ),
        _rule(
            "r.rng",
            {"kind": "token", "section": "s", "range": {"start": 0, "endExclusive": 1}},
            {"title": "first", "type": "text"},
        ),
        _rule(
            "r.ref",
            {"kind": "token", "section": "lv", "index": 1, "recordTokens": 3, "contextIndex": 0},
            {"title": "skill", "type": "reference", "relation": "skill"},
        ),
        relations={
            "skill": {"kind": "contextual", "contextPaths": {"[mage]": "skill/mageskill.lst"}},
        },
    )
    res = Stub({"skill/mageskill.lst": [(7, "mage/fire.skl")]}, {"skill/mage/fire.skl"})
    text = "[s]\n0 1 2 3 4 5 6 7\n[lv]\n`[mage]` 7 1 `[mage]` 8 1 `[thief]` 7 1\n"
    an = Annotator(rs, res, "x.equ", family="classic", variant="classic", lang="en", text=text)
    _, order = parse(text)
    s = an.section(order[0], max_values=24)
    assert [(t["index"], t["ruleId"]) for t in s["tokens"]] == [(0, "r.rng"), (2, "r.idx"), (5, "r.idx")]
    lv = an.section(order[1], max_values=24)
    refs = [t["reference"] for t in lv["tokens"]]
    assert refs[0]["resolved"] and refs[0]["path"] == "skill/mage/fire.skl" and refs[0]["name"]
    assert refs[1] == {
        **refs[1],
        "resolved": False,
        "reason": "id 8 is not registered in skill/mageskill.lst",
    }
    assert refs[2]["reason"] == "no list for context [thief]"


def test_spans_count_utf16_units_like_a_browser() -> None:
    rs = _rules(_rule("r", {"kind": "token", "section": "s"}, {"title": "t", "type": "text"}))
    text = "[s]\n`😀x` 42\n"
    an = Annotator(rs, Stub({}, set()), "a.equ", family=None, variant=None, lang="en", text=text)
    _, order = parse(text)
    toks = an.section(order[0], max_values=8)["tokens"]
    utf16 = text.encode("utf-16-le")
    got = [utf16[2 * t["offset"] : 2 * (t["offset"] + t["length"])].decode("utf-16-le") for t in toks]
    assert got == ["`😀x`", "42"] and toks[1]["line"] == 2


def test_match_extension_glob_family_and_variant_labels() -> None:
    r = {
        "match": {
            "extensions": [".equ"],
            "glob": "equipment/**/weapon/*.equ",
            "families": ["nkpi"],
            "variants": ["110US"],
        }
    }
    assert file_matches(r, "Equipment/character/swordman/Weapon/a.EQU", "nkpi", "paged")
    assert not file_matches(r, "equipment/character/swordman/weapon/a.equ", "nkpi", "legacy")
    assert not file_matches(r, "equipment/weapon/sub/a.equ", "nkpi", "paged")  # * stays in its folder
    assert file_matches(r, "equipment/weapon/a.equ", "nkpi", "paged")  # **/ may be empty
    assert not file_matches(r, "equipment/weapon/a.equ", "classic", "classic")


def test_builtin_lst_paths_and_str_entries() -> None:
    rs = RuleStore(None).current()
    text = "#PVF_File\n900101\t`annotated/swordman/gorecross.skl`\n"
    res = Stub(
        {"skill/swordmanskill.lst": [(900101, "annotated/swordman/gorecross.skl")]},
        {"skill/annotated/swordman/gorecross.skl"},
    )
    an = Annotator(
        rs, res, "skill/swordmanskill.lst", family="classic", variant="classic", lang="zh-CN", text=text
    )
    root, _ = parse(text)
    toks = an.section(root, max_values=8)["tokens"]
    assert toks[0]["title"] == "注册 ID"
    assert toks[1]["target"] == {"path": "skill/annotated/swordman/gorecross.skl", "exists": True}
    assert str_entries("// c\r\nname_1>剑>二\r\n\r\nbad line\r\n") == [(2, "name_1", "剑>二")]


def test_tag_values_as_nkpi_writes_them() -> None:
    """nkpi stores `[fighter]`, `[weapon]` as tags, not strings: the rules' tag reading makes them values."""
    rs = RuleStore(None).current()
    res = Stub(
        {
            "skill/fighterskill.lst": [(5, "fighter/a.skl")],
            "skill/atfighterskill.lst": [(20, "atfighter/b.skl")],
        },
        {"skill/fighter/a.skl", "skill/atfighter/b.skl"},
    )
    text = (
        "[equipment type]\n[weapon]\n[physical defense]\n45\n"
        "[skill levelup]\n[fighter]\n5 1\n[at fighter]\n20 1\n[/skill levelup]\n"
        "[attach type]\n[trade]\n[if equip]\n[physical attack]\n10\n[/if equip]\n"
    )
    an = Annotator(rs, res, "a/b.equ", family="nkpi", variant="legacy", lang="en", text=text)
    # Without the rules' reading every tag is a section (how the text alone reads).
    _, flat = parse(text)
    assert [s.name for s in flat][:4] == ["equipment type", "weapon", "physical defense", "skill levelup"]
    _, order = parse(text, an.tag_reading())
    assert [s.path for s in order] == [
        "equipment type",
        "physical defense",
        "skill levelup",
        "attach type",
        "if equip",
        "if equip/physical attack",
    ]
    by = {s.path: s for s in order}
    et = an.section(by["equipment type"], max_values=8)
    assert et["values"] == ["[weapon]"] and et["tokens"][0]["label"] == "Weapon"
    lv = an.section(by["skill levelup"], max_values=8)
    assert lv["values"] == ["[fighter]", "5", "1", "[at fighter]", "20", "1"]
    refs = [t["reference"] for t in lv["tokens"] if t["type"] == "reference"]
    assert [(r["context"], r["listPath"], r["path"]) for r in refs] == [
        ("[fighter]", "skill/fighterskill.lst", "skill/fighter/a.skl"),
        ("[at fighter]", "skill/atfighterskill.lst", "skill/atfighter/b.skl"),
    ]
    # the tag token's span is the tag in the text (the viewer underlines it)
    job = lv["tokens"][0]
    assert text[job["offset"] : job["offset"] + job["length"]] == "[fighter]"
    assert an.section(by["attach type"], max_values=8)["tokens"][0]["label"]
    assert [str(t.value) for t, _ in by["physical defense"].values()] == ["45"]


def test_tag_values_without_an_end_tag_and_unknown_tags() -> None:
    rs = RuleStore(None).current()
    an = Annotator(rs, Stub({}, set()), "a.equ", family="nkpi", variant="legacy", lang="en")
    # no end tag: the listed job tags still belong to the level-up, record after record
    text = "[skill levelup]\n[mage] 7 1 [mage] 8 2\n[usable job]\n[new job]\n[/usable job]\n[grade]\n[odd]\n"
    _, order = parse(text, an.tag_reading())
    assert [s.path for s in order] == ["skill levelup", "usable job", "grade", "odd"]
    assert [str(t.value) for t, _ in order[0].values()] == ["[mage]", "7", "1", "[mage]", "8", "2"]
    # a tag no rule lists is a value only as a section's first value ([usable job] reads it)
    assert [str(t.value) for t, _ in order[1].values()] == ["[new job]"]
    # [grade] is not read by a token rule for .equ: [odd] stays a section
    assert order[3].values() == []


def _positions_by_loop(target: dict, n: int) -> list[tuple[int, int | None]]:
    """The selection rule spelled out value by value (docs/pvf-annotations.md "target")."""
    off, size, idx, rng = (target.get(k) for k in ("offset", "recordTokens", "index", "range"))
    off = off or 0

    def inner(width: int) -> list[int]:
        if idx is not None:
            return [idx] if idx < width else []
        if rng is not None:
            return list(range(rng["start"], min(rng["endExclusive"], width)))
        return list(range(width))

    if size:
        return [(s + k, s) for s in range(off, n - size + 1, size) for k in inner(size)]
    return [(off + k, None) for k in inner(n - off)]


def test_selections_are_the_value_by_value_rule() -> None:
    from deskbridge.kinds.pvf.annotations.engine import _selections

    targets = [
        {},
        {"index": 1},
        {"index": 9},
        {"offset": 2},
        {"range": {"start": 1, "endExclusive": 4}},
        {"recordTokens": 3, "index": 1},
        {"recordTokens": 2, "offset": 1},
        {"recordTokens": 4, "range": {"start": 1, "endExclusive": 9}},
        {"recordTokens": 3, "offset": 5, "index": 2},
    ]
    for target in targets:
        for n in (0, 1, 2, 5, 7, 12):
            want = _positions_by_loop(target, n)
            got = sorted(
                (p, p - k if target.get("recordTokens") else None)
                for positions, k in _selections(target, n)
                for p in positions
            )
            assert got == sorted(want), (target, n)
