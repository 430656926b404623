"""The annotation tools over a real MCP client against `deskbridge serve`, on annotated synthetic archives of both
families (and the paged nkpi variant, whose registries are root-relative under list/): the two questions of the
issue answered in one call each, every built-in rule exercised, references through .lst, .str/.lst/link
explanations, search/detail, user rule override and refusal, paging and revision checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pvfws_helpers import Agent, serve

from deskbridge.kinds.pvf.annotations import RuleStore
from deskbridge.kinds.pvf.annotations.rules import USER_DIR_NAME
from deskbridge.kinds.pvf.synth import synth
from deskbridge.kinds.pvf.synth.content import GAME_HANS, GAME_HANT
from deskbridge.kinds.pvf.synth.nkpi import synth_nkpi

pytestmark = pytest.mark.anyio

SWORD = "equipment/annotated/swordman_sword.equ"
VARIANTS = ["classic", "nkpi", "paged"]


@pytest.fixture(scope="module")
def annotated_archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pvf-annotated")
    out = {}
    for family in ("classic", "nkpi"):
        p = root / f"{family}.pvf"
        synth(p, family=family, files=160, seed=7, annotated=True)
        out[family] = p
    paged = root / "paged.pvf"
    synth_nkpi(paged, 60, 5, "paged", annotated=True)
    out["paged"] = paged
    return out


@pytest.fixture(params=VARIANTS)
def variant(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def annotated(annotated_archives: dict[str, Path], variant: str, tmp_path: Path) -> Path:
    dest = tmp_path / "Script.pvf"
    shutil.copyfile(annotated_archives[variant], dest)
    src_keys = Path(f"{annotated_archives[variant]}.keys.json")
    if src_keys.exists():
        shutil.copyfile(src_keys, f"{dest}.keys.json")
    return dest


def _words(variant: str) -> list[str]:
    return GAME_HANT if variant == "classic" else GAME_HANS


async def _open(a: Agent, archive: Path) -> dict[str, Any]:
    info = await a.call("pvf_workspace_info", {})
    args: dict[str, Any] = {"path": str(archive), "expectedWorkspaceEpoch": info["workspaceEpoch"]}
    keys = Path(f"{archive}.keys.json")
    if keys.exists():
        args["keyFile"] = str(keys)
    opened = await a.call("pvf_archive_open", args)
    assert opened["state"] == "succeeded", opened
    return await a.ready()


async def _explain_all(a: Agent, ws: str, path: str, **extra: Any) -> list[dict[str, Any]]:
    pages = []
    cursor = None
    while True:
        args = {"workspaceId": ws, "path": path, **extra}
        if cursor:
            args["cursor"] = cursor
        page = await a.call("pvf_explain_file", args)
        pages.append(page)
        cursor = page.get("nextCursor")
        if not cursor:
            return pages


def _hits(pages: list[dict[str, Any]]) -> set[str]:
    out: set[str] = set()
    for page in pages:
        out |= {f["ruleId"] for f in page["fileAnnotations"]}
        for sec in page.get("sections", []):
            if "annotation" in sec:
                out.add(sec["annotation"]["ruleId"])
                out |= set(sec["annotation"].get("alsoMatched", []))
            for tok in sec["tokens"]:
                out.add(tok["ruleId"])
                out |= set(tok.get("alsoMatched", []))
    return out


async def test_what_rarity_4_means_and_which_skill_a_levelup_raises_in_one_call_each(
    annotated: Path, variant: str
) -> None:
    w = _words(variant)
    async with serve(None) as a:
        ws = (await _open(a, annotated))["workspaceId"]
        # "What does [rarity] 4 mean in this file?"
        ans = await a.call(
            "pvf_explain_file", {"workspaceId": ws, "path": SWORD, "sections": ["[rarity]"], "lang": "en"}
        )
        (sec,) = ans["sections"]
        (tok,) = sec["tokens"]
        assert (sec["name"], tok["value"], tok["type"], tok["label"]) == ("rarity", "4", "enum", "Epic")
        assert tok["title"] == "Rarity" and tok["ruleId"] == "equ.rarity"
        zh = await a.call("pvf_explain_file", {"workspaceId": ws, "path": SWORD, "sections": ["rarity"]})
        assert zh["lang"] == "zh-CN" and zh["sections"][0]["tokens"][0]["label"] == "史诗"
        # "Which skill does this level-up raise?"
        ans = await a.call(
            "pvf_explain_file",
            {"workspaceId": ws, "path": SWORD, "sections": ["skill levelup"], "lang": "en"},
        )
        toks = ans["sections"][0]["tokens"]
        refs = [t for t in toks if t["type"] == "reference"]
        assert [t["value"] for t in refs] == ["900101", "900102"]
        first = refs[0]["reference"]
        assert first["resolved"] and first["exists"]
        assert first["context"] == "[swordman]" and first["listPath"] == "skill/swordmanskill.lst"
        assert first["path"] == "skill/annotated/swordman/gorecross.skl" and first["name"] == w[12]
        assert refs[1]["reference"]["name"] == w[13]
        jobs = [t["label"] for t in toks if t["ruleId"] == "equ.skill-levelup.job"]
        levels = [t["value"] for t in toks if t["ruleId"] == "equ.skill-levelup.levels"]
        assert jobs == ["Slayer (M)", "Slayer (M)"] and levels == ["2", "1"]
        # The mage amulet's level-up resolves through the mage's list.
        amulet = await a.call(
            "pvf_explain_file",
            {"workspaceId": ws, "path": "equipment/annotated/mage_amulet.equ", "sections": ["skill levelup"]},
        )
        ref = next(t for t in amulet["sections"][0]["tokens"] if t["type"] == "reference")["reference"]
        assert ref["listPath"] == "skill/mageskill.lst" and ref["name"] == w[15]


FIXTURE_FILES = [
    SWORD,
    "equipment/annotated/mage_amulet.equ",
    "skill/annotated/swordman/gorecross.skl",
    "stackable/annotated/material.stk",
    "stackable/annotated/box.stk",
    "monster/annotated/goblin.mob",
    "npc/annotated/seria.npc",
    "dungeon/annotated/grandflores.dgn",
    "n_quest/annotated/first.qst",
    "skill/swordmanskill.lst",
]


async def test_every_builtin_rule_is_exercised_and_every_reference_resolves(
    annotated: Path, variant: str
) -> None:
    builtin = {r["id"] for r in RuleStore(None).current().rules}
    async with serve(None) as a:
        ws = (await _open(a, annotated))["workspaceId"]
        hit: set[str] = set()
        for path in FIXTURE_FILES:
            pages = await _explain_all(a, ws, path, lang="en", limit=7)
            hit |= _hits(pages)
            for page in pages:
                for sec in page["sections"]:
                    for tok in sec["tokens"]:
                        if tok["type"] == "reference":
                            ref = tok["reference"]
                            assert ref["resolved"] and ref["exists"] and ref["name"], (path, sec["name"], ref)
                        if tok["type"] == "enum":
                            assert not tok.get("unknownValue"), (path, tok)
                        if tok["type"] == "path":
                            assert tok["target"]["exists"], (path, tok)
        # A .str table of the base content.
        strs = await a.call("pvf_search", {"workspaceId": ws, "query": ".str", "limit": 1})
        str_page = await a.call("pvf_explain_file", {"workspaceId": ws, "path": strs["hits"][0]["path"]})
        hit |= _hits([str_page])
        assert sorted(builtin - hit) == []


async def test_lst_str_and_string_links_are_explained(annotated: Path, variant: str) -> None:
    async with serve(None) as a:
        ws = (await _open(a, annotated))["workspaceId"]
        lst = await a.call("pvf_explain_file", {"workspaceId": ws, "path": "skill/swordmanskill.lst"})
        root = lst["sections"][0]
        assert root["name"] is None
        paths = [t["target"] for t in root["tokens"] if t["ruleId"] == "lst.path"]
        assert paths[0] == {"path": "skill/annotated/swordman/gorecross.skl", "exists": True}
        quest_list = "list/quest.lst" if variant == "paged" else "n_quest/quest.lst"
        q = await a.call("pvf_explain_file", {"workspaceId": ws, "path": quest_list})
        assert q["sections"][0]["tokens"][1]["target"] == {
            "path": "n_quest/annotated/first.qst",
            "exists": True,
        }
        # .str: entries with the links that point at them (table ids from n_string.lst).
        found = await a.call("pvf_search", {"workspaceId": ws, "query": "equipment.", "limit": 50})
        str_path = next(h["path"] for h in found["hits"] if h["path"].lower().endswith(".str"))
        page = await a.call("pvf_explain_file", {"workspaceId": ws, "path": str_path, "limit": 3})
        assert page["kind"] == "str" and page["linkTables"] == [0] and len(page["entries"]) == 3
        e = page["entries"][0]
        assert e["links"] == [f"<0::{e['key']}>"] and page["nextCursor"]
        # A base-content item whose name is a string link: shown with its text.
        resolved = await a.call("pvf_resolve", {"workspaceId": ws, "link": f"<0::{e['key']}>"})
        assert resolved["text"] == e["value"]
        hits = await a.call("pvf_search", {"workspaceId": ws, "query": ".equ", "limit": 1})
        item = await a.call(
            "pvf_explain_file", {"workspaceId": ws, "path": hits["hits"][0]["path"], "sections": ["name"]}
        )
        name = item["sections"][0]
        linked = [t for t in name["tokens"] if "text" in t]
        if linked:  # classic names are <id::key> links, nkpi names inline strings (synth/nkpi.py)
            assert linked[0]["text"] and linked[0]["text"] in name["values"][0]


async def test_search_and_detail(annotated: Path, variant: str) -> None:
    async with serve(None) as a:
        ws = (await _open(a, annotated))["workspaceId"]
        found = await a.call("pvf_annotation_search", {"query": "史诗"})
        rarity = next(r for r in found["rules"] if r["ruleId"] == "equ.rarity")
        assert rarity["values"]["4"] == "史诗" and rarity["matchedIn"] == ["value 4"]
        en = await a.call("pvf_annotation_search", {"query": "epic", "extension": ".equ", "lang": "en"})
        assert en["rules"][0]["values"]["4"] == "Epic" and "pvf_annotation_detail" in en["hint"]
        # Pagination covers everything exactly once.
        seen: list[str] = []
        cursor = None
        first_cursor = None
        while True:
            args: dict[str, Any] = {"query": "", "extension": "mob", "limit": 5}
            if cursor:
                args["cursor"] = cursor
            page = await a.call("pvf_annotation_search", args)
            seen += [r["ruleId"] for r in page["rules"]]
            cursor = page["nextCursor"]
            first_cursor = first_cursor or cursor
            if not cursor:
                break
        assert len(seen) == len(set(seen)) == page["total"] and "mob.level" in seen
        await a.fail("pvf_annotation_search", {"query": "other", "cursor": first_cursor}, "INVALID_ARGUMENT")
        detail = await a.call(
            "pvf_annotation_detail", {"ruleId": "equ.skill-levelup", "workspaceId": ws, "lang": "en"}
        )
        assert detail["relation"]["kind"] == "contextual" and detail["rule"]["source"]
        assert detail["origin"] == "builtin" and detail["rule"]["target"]["recordTokens"] == 3
        ex = detail["examples"]
        assert any(e["path"] == SWORD for e in ex), ex
        sword = next(e for e in ex if e["path"] == SWORD)
        assert sword["tokens"][0]["reference"]["path"] == "skill/annotated/swordman/gorecross.skl"
        union = await a.call("pvf_annotation_detail", {"ruleId": "stk.output-item"})
        assert [m["name"] for m in union["relation"]["members"]] == ["equipment", "stackable"]
        assert union["examples"] == [] and "workspaceId" in union["hint"]
        await a.fail("pvf_annotation_detail", {"ruleId": "no.such.rule"}, "NOT_FOUND")


async def test_user_rules_override_and_a_refused_file_is_reported(
    annotated: Path, variant: str, deskbridge_home: Path
) -> None:
    user = deskbridge_home / "config" / USER_DIR_NAME
    user.mkdir(parents=True)
    mine = {
        "format": "deskbridge-pvf-annotations",
        "version": 1,
        "rules": [
            {
                "id": "equ.rarity",
                "match": {"extensions": [".equ"]},
                "target": {"kind": "token", "section": "rarity", "index": 0},
                "annotation": {
                    "title": {"zh-CN": "品级", "en": "Grade"},
                    "type": "enum",
                    "values": {"4": {"zh-CN": "紫色", "en": "Purple"}},
                },
                "source": "test",
            }
        ],
    }
    (user / "10-mine.json").write_text(json.dumps(mine), encoding="utf-8")
    bad = {
        **mine,
        "rules": [{**mine["rules"][0], "target": {"kind": "token", "section": "x", "index": "one"}}],
    }
    (user / "20-bad.json").write_text(json.dumps(bad), encoding="utf-8")
    async with serve(None) as a:
        ws = (await _open(a, annotated))["workspaceId"]
        found = await a.call("pvf_annotation_search", {"query": "rarity", "extension": ".equ", "lang": "en"})
        assert found["userFiles"] == ["10-mine.json"]
        (refused,) = found["refusedFiles"]
        assert refused["file"] == "20-bad.json" and refused["jsonPath"] == "$.rules[0].target.index"
        assert (
            found["rules"][0]["ruleId"] == "equ.rarity" and found["rules"][0]["origin"] == "user:10-mine.json"
        )
        ans = await a.call(
            "pvf_explain_file", {"workspaceId": ws, "path": SWORD, "sections": ["rarity"], "lang": "en"}
        )
        tok = ans["sections"][0]["tokens"][0]
        assert (tok["title"], tok["label"], tok["alsoMatched"]) == ("Grade", "Purple", ["global.rarity"])
        # Built-ins keep working beside the refused file.
        ans = await a.call(
            "pvf_explain_file", {"workspaceId": ws, "path": SWORD, "sections": ["attach type"]}
        )
        assert ans["sections"][0]["tokens"][0]["label"] == "不可交易"
        # Removing the user file brings the built-in back without a restart.
        (user / "10-mine.json").unlink()
        ans = await a.call("pvf_explain_file", {"workspaceId": ws, "path": SWORD, "sections": ["rarity"]})
        assert ans["sections"][0]["tokens"][0]["label"] == "史诗"


async def test_explain_pages_revisions_and_errors(annotated: Path, variant: str) -> None:
    async with serve(None) as a:
        info = await _open(a, annotated)
        ws, rev = info["workspaceId"], info["revision"]
        whole = await a.call("pvf_explain_file", {"workspaceId": ws, "path": SWORD, "limit": 200})
        assert whole["nextCursor"] is None and whole["totalSections"] == len(whole["sections"])
        pages = await _explain_all(a, ws, SWORD, limit=4)
        assert len(pages) > 3 and [s["path"] for p in pages for s in p["sections"]] == [
            s["path"] for s in whole["sections"]
        ]
        assert "nextCursor" in pages[0]["hint"]
        assert whole["fileAnnotations"] == [{"ruleId": "equ.path", "title": "装备脚本", "type": "text"}]
        missing = await a.call("pvf_explain_file", {"workspaceId": ws, "path": SWORD, "sections": ["nope"]})
        assert missing["sections"] == [] and missing["missingSections"] == ["nope"]
        await a.fail("pvf_explain_file", {"workspaceId": ws, "path": "no/such.equ"}, "NOT_FOUND")
        await a.fail(
            "pvf_explain_file",
            {"workspaceId": ws, "path": SWORD, "expectedRevision": rev + 1},
            "STALE_WORKSPACE",
        )
        # An unknown section is listed as such.
        applied = await a.edit(ws, rev, SWORD, "\n[my own section]\n\t1\n")
        page = await a.call(
            "pvf_explain_file", {"workspaceId": ws, "path": SWORD, "sections": ["my own section"]}
        )
        assert page["sections"][0]["known"] is False and "my own section" in page["unknownSections"]
        assert page["revision"] == applied["revision"]
        # A cursor from before the edit is refused.
        await a.fail(
            "pvf_explain_file",
            {"workspaceId": ws, "path": SWORD, "limit": 4, "cursor": pages[0]["nextCursor"]},
            "STALE_WORKSPACE",
        )


# --------------------------------------------------------------------------------------------- real vectors


def _tokens(page: dict[str, Any], section: str) -> list[dict[str, Any]]:
    return next(s for s in page["sections"] if s["name"] == section)["tokens"]


async def test_vectors_written_by_other_tools_are_explained(shared_data: Path, tmp_path: Path) -> None:
    """Archives written by pvf-parser-ts (classic) and pvfVSCode (nkpi), not by our synthesiser: string links
    shown with their text, jobs written as tags inside [usable job], nkpi tag values read as values, values no
    rule knows flagged."""
    classic = tmp_path / "pt.pvf"
    shutil.copyfile(shared_data / "pvf" / "pt_tw_shared.pvf", classic)
    async with serve(classic) as a:
        ws = (await a.ready())["workspaceId"]
        shoes = await a.call(
            "pvf_explain_file",
            {"workspaceId": ws, "path": "equipment/character/common/shoes/leathershoes.equ"},
        )
        name = _tokens(shoes, "name")[0]
        assert name["value"] == "<0::name_4>" and name["text"] == "皮革短靴"
        kind = _tokens(shoes, "equipment type")[0]
        assert kind["value"] == "[shoes]" and kind["unknownValue"] is True and kind["label"] is None
        assert _tokens(shoes, "physical defense")[0]["title"] == "体力"
        skill = await a.call(
            "pvf_explain_file",
            {"workspaceId": ws, "path": "skill/swordman/upperslash.skl", "lang": "en"},
        )
        assert _tokens(skill, "name")[0]["text"] == "上挑"
        cool = next(s for s in skill["sections"] if s["name"] == "cool time")
        assert cool["annotation"]["ruleId"] == "global.cool-time" and cool["annotation"]["unit"] == "ms"
        assert "static data" in skill["unknownSections"]
        # a Squirrel script is plain text, not a token script: no sections, no SCRIPT_SYNTAX
        nut = await a.call("pvf_explain_file", {"workspaceId": ws, "path": "sqr/common.nut"})
        assert (nut["kind"], nut["sections"]) == ("text", []) and "pvf_read_file" in nut["hint"]
    nkpi = tmp_path / "vs.pvf"
    shutil.copyfile(shared_data / "pvf" / "vs_jp_shared.pvf", nkpi)
    async with serve(nkpi) as a:
        ws = (await a.ready())["workspaceId"]
        sword = await a.call(
            "pvf_explain_file",
            {"workspaceId": ws, "path": "equipment/character/swordman/weapon/longsword.equ", "lang": "en"},
        )
        jobs = next(s for s in sword["sections"] if s["name"] == "usable job")
        assert jobs["container"] and jobs["values"] == ["[swordman]"]
        assert [t["label"] for t in jobs["tokens"]] == ["Slayer (M)"]
        nested = [s["path"] for s in sword["sections"] if s["path"].startswith("if equip/")]
        assert nested == ["if equip/physical attack", "if equip/magical attack"]
        # pvfVSCode writes tag-like values as tags ([equipment type] [coat]): read as values, not sections
        coat = await a.call(
            "pvf_explain_file",
            {"workspaceId": ws, "path": "equipment/character/common/coat/clothcoat.equ", "lang": "en"},
        )
        (kind,) = _tokens(coat, "equipment type")
        assert (kind["value"], kind["ruleId"], kind["unknownValue"]) == ("[coat]", "equ.equipment-type", True)
        assert "coat" not in coat["unknownSections"]
        short = await a.call(
            "pvf_explain_file",
            {"workspaceId": ws, "path": "equipment/character/swordman/weapon/shortsword.equ", "lang": "en"},
        )
        assert [t["value"] for t in _tokens(short, "attach type")] == ["[free]"]
        potion = await a.call(
            "pvf_explain_file", {"workspaceId": ws, "path": "stackable/potion/hp_potion.stk", "lang": "en"}
        )
        kind = next(s for s in potion["sections"] if s["name"] == "stackable type")
        assert kind["values"] == ["[recover hp]", "0"]
        assert kind["tokens"][0]["ruleId"] == "stk.stackable-type"
        # the real [recover hp] section later in the file is still a section
        assert [s["values"] for s in potion["sections"] if s["name"] == "recover hp"] == [["300", "8000"]]


# --------------------------------------------------------------------------------------------- editing user rules


def _rarity_rule(label_en: str) -> str:
    return json.dumps(
        {
            "format": "deskbridge-pvf-annotations",
            "version": 1,
            "rules": [
                {
                    "id": "mine.rarity",
                    "match": {"extensions": [".equ"]},
                    "target": {"kind": "token", "section": "rarity", "index": 0},
                    "annotation": {"title": "Mine", "type": "enum", "values": {"4": {"en": label_en}}},
                }
            ],
        }
    )


async def test_preview_a_draft_then_save_it(
    annotated_archives: dict[str, Path], deskbridge_home: Path
) -> None:
    async with serve(annotated_archives["classic"]) as a:
        ws = (await a.ready())["workspaceId"]
        args = {"workspaceId": ws, "path": SWORD, "sections": ["rarity"], "lang": "en"}
        draft = await a.call("pvf_explain_file", {**args, "draftRules": _rarity_rule("Gold")})
        tok = draft["sections"][0]["tokens"][0]
        assert (tok["ruleId"], tok["label"], tok["alsoMatched"]) == (
            "mine.rarity",
            "Gold",
            ["equ.rarity", "global.rarity"],
        )
        bad = await a.fail("pvf_explain_file", {**args, "draftRules": "{}"}, "INVALID_ARGUMENT")
        assert bad["data"]["jsonPath"] == "$"
        # nothing was written by the preview
        assert (await a.call("pvf_annotation_rules_get", {}))["files"] == []
        assert (await a.call("pvf_explain_file", args))["sections"][0]["tokens"][0]["label"] == "Epic"
        saved = await a.call(
            "pvf_annotation_rules_save",
            {"fileName": "10-mine.json", "text": _rarity_rule("Gold"), "expectedSha256": ""},
        )
        assert saved["loaded"] and saved["priority"] == 0 and saved["rules"] == 1
        assert (await a.call("pvf_explain_file", args))["sections"][0]["tokens"][0]["label"] == "Gold"
        got = await a.call("pvf_annotation_rules_get", {"fileName": "10-mine.json"})
        assert got["sha256"] == saved["sha256"] and json.loads(got["text"])["rules"][0]["id"] == "mine.rarity"
        # a stale sha is refused; an invalid file is refused with its path and the old file stays
        await a.fail(
            "pvf_annotation_rules_save",
            {"fileName": "10-mine.json", "text": _rarity_rule("Silver"), "expectedSha256": ""},
            "TARGET_CHANGED",
        )
        broken = json.loads(_rarity_rule("x"))
        broken["rules"][0]["annotation"]["type"] = "colour"
        err = await a.fail(
            "pvf_annotation_rules_save",
            {"fileName": "10-mine.json", "text": json.dumps(broken)},
            "INVALID_ARGUMENT",
        )
        assert err["data"]["jsonPath"] == "$.rules[0].annotation.type"
        assert (deskbridge_home / "config" / USER_DIR_NAME / "10-mine.json").read_text(
            "utf-8"
        ) == _rarity_rule("Gold")
        await a.call(
            "pvf_annotation_rules_save",
            {"fileName": "10-mine.json", "text": _rarity_rule("Silver"), "expectedSha256": got["sha256"]},
        )
        assert (await a.call("pvf_explain_file", args))["sections"][0]["tokens"][0]["label"] == "Silver"


@pytest.mark.security
@pytest.mark.parametrize(
    "name", ["../escape.json", "sub/x.json", ".hidden.json", "x.txt", "/abs.json", "a" * 80 + ".json"]
)
async def test_rule_file_names_cannot_leave_the_rule_folder(
    annotated_archives: dict[str, Path], deskbridge_home: Path, name: str
) -> None:
    async with serve(annotated_archives["classic"]) as a:
        await a.fail(
            "pvf_annotation_rules_save", {"fileName": name, "text": _rarity_rule("x")}, "INVALID_ARGUMENT"
        )
        await a.fail("pvf_annotation_rules_get", {"fileName": name}, "INVALID_ARGUMENT")
    written = [p for p in deskbridge_home.rglob("*") if p.name in {"escape.json", "x.json", "abs.json"}]
    assert written == [] and not Path("/abs.json").exists()


async def test_a_long_section_continues_over_pages(
    annotated_archives: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from deskbridge.kinds.pvf import annotation_tools

    async with serve(annotated_archives["classic"]) as a:
        ws = (await a.ready())["workspaceId"]
        args = {"workspaceId": ws, "path": "equipment/equipment.lst"}
        whole = await a.call("pvf_explain_file", args)
        (root,) = whole["sections"]
        assert "tokensTruncated" not in root and len(root["tokens"]) > 40
        monkeypatch.setattr(annotation_tools, "EXPLAIN_TOKEN_BUDGET", 7)
        pages = await _explain_all(a, ws, "equipment/equipment.lst")
        parts = [p["sections"][0] for p in pages]
        assert len(parts) == -(-len(root["tokens"]) // 7)
        assert [p["tokensFrom"] for p in parts] == list(range(0, len(root["tokens"]), 7))
        assert all(p["tokensTruncated"] for p in parts[:-1]) and "tokensTruncated" not in parts[-1]
        assert [t for p in parts for t in p["tokens"]] == root["tokens"]


LISTS = {
    "classic": "equipment/equipment.lst",
    "nkpi": "equipment/equipment.lst",
    "paged": "list/stackable.lst",
}


async def test_a_large_list_is_paged_from_its_first_records_with_the_same_answers(
    annotated: Path, variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large .lst is explained from a decoded prefix (read further as pages need it); every page equals
    the one read from the whole text. Small thresholds make the synthetic lists "large"."""
    from deskbridge.kinds.pvf import annotation_tools

    lazy: list[int] = []
    real = annotation_tools._large_list

    def spy(*args: Any) -> Any:
        root = real(*args)
        if root is not None:
            lazy.append(root.value_count)
        return root

    monkeypatch.setattr(annotation_tools, "_large_list", spy)
    monkeypatch.setattr(annotation_tools, "EXPLAIN_TOKEN_BUDGET", 9)
    path = LISTS[variant]
    async with serve(None) as a:
        ws = (await _open(a, annotated))["workspaceId"]
        monkeypatch.setattr(annotation_tools, "LIST_PREFIX_TOKENS", 1 << 30)
        whole = await _explain_all(a, ws, path, lang="en")
        assert lazy == []
        monkeypatch.setattr(annotation_tools, "LIST_PREFIX_TOKENS", 12)
        paged = await _explain_all(a, ws, path, lang="en")
        first = whole[0]["sections"][0]
        assert lazy and set(lazy) == {first.get("valueCount", len(first["values"]))}
        assert len(paged) == len(whole) >= 2
        assert paged == whole
        # the record's path is resolved against the list's own folder (or the root for list/ lists)
        tok = next(t for t in paged[-1]["sections"][0]["tokens"] if t["ruleId"] == "lst.path")
        assert tok["target"]["exists"], tok
