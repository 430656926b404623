"""Annotation rule files: the schema (published in docs/pvf-annotations.md), refusal with the failing JSON path,
user rules overriding and extending the built-ins in priority order, labels in zh-CN and en, search."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.annotations import RuleStore, localize, schema
from deskbridge.kinds.pvf.annotations.rules import USER_DIR_NAME, validate_document

DOCS = Path(__file__).resolve().parents[3] / "docs" / "pvf-annotations.md"


def _write(cfg: Path, name: str, doc: object) -> Path:
    d = cfg / USER_DIR_NAME
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return p


def _doc(*rules: dict, relations: dict | None = None) -> dict:
    out: dict = {"format": "deskbridge-pvf-annotations", "version": 1, "rules": list(rules)}
    if relations:
        out["relations"] = relations
    return out


def _rule(rid: str, section: str, title: object, **ann: object) -> dict:
    return {
        "id": rid,
        "match": {"extensions": [".equ"]},
        "target": {"kind": "token", "section": section, "index": 0},
        "annotation": {"title": title, "type": "text", **ann},
    }


def test_builtins_validate_and_every_rule_names_its_source() -> None:
    rs = RuleStore(None).current()
    assert len(rs.rules) > 100 and not rs.errors
    for rule in rs.rules:
        assert rule.get("source"), rule["id"]
        title = rule["annotation"]["title"]
        assert set(title) == {"zh-CN", "en"}, rule["id"]
    for name, rel in rs.relations.items():
        assert rel.get("source"), name
    exts = {e for r in rs.rules for e in r["match"].get("extensions", [])}
    assert {".equ", ".stk", ".skl", ".mob", ".npc", ".dgn", ".lst", ".str", ".qst"} <= exts


def test_the_schema_in_the_docs_is_the_one_the_package_validates_with() -> None:
    text = DOCS.read_text(encoding="utf-8")
    m = re.search(r"<!-- schema:begin -->\s*```json\n(.*?)```\s*<!-- schema:end -->", text, re.S)
    assert m, "docs/pvf-annotations.md must publish the schema between the schema markers"
    assert json.loads(m.group(1)) == schema()


def test_labels_in_both_languages() -> None:
    rs = RuleStore(None).current()
    rarity = rs.rule("equ.rarity")["annotation"]
    assert localize(rarity["title"], "zh-CN") == "稀有度" and localize(rarity["title"], "en") == "Rarity"
    assert (
        localize(rarity["values"]["4"], "zh-CN") == "史诗" and localize(rarity["values"]["4"], "en") == "Epic"
    )
    assert localize(rarity["values"]["4"], "zh") == "史诗"  # a language without region
    assert localize("同一", "en") == "同一"  # a plain string is every language


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        ({"format": "deskbridge-pvf-annotations", "version": 2}, "$.version"),
        (_doc({"id": "x", "match": {}, "target": {"kind": "token"}}), "$.rules[0]"),
        (_doc(_rule("x", "rarity", "t") | {"target": {"kind": "bogus"}}), "$.rules[0].target.kind"),
        (_doc(_rule("x", "rarity", "t", type="enum")), "$.rules[0].annotation"),
        (_doc(_rule("x", "rarity", {"zh-CN": ""})), "$.rules[0].annotation.title"),
        (
            _doc(_rule("x", "rarity", "t", type="reference", relation="nope")),
            "$.rules[0].annotation.relation",
        ),
        (
            _doc(relations={"r": {"kind": "union", "relations": ["missing"]}}),
            "$.relations.r.relations[0]",
        ),
        (
            _doc(
                _rule("x", "rarity", "t")
                | {"target": {"kind": "token", "section": "a", "range": {"start": 3, "endExclusive": 2}}}
            ),
            "$.rules[0].target.range",
        ),
    ],
)
def test_a_bad_document_is_refused_with_the_failing_path(doc: dict, path: str) -> None:
    with pytest.raises(BridgeError) as exc:
        validate_document(doc, "mine.json", {"equipment"})
    assert exc.value.code == "INVALID_ARGUMENT"
    assert exc.value.data["jsonPath"].startswith(path), exc.value.data
    assert "pvf-annotations.md" in exc.value.hint


def test_user_rules_override_and_extend_in_priority_order(tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    store = RuleStore(cfg)
    base = store.current()
    assert base.rules[0]["origin"] == "builtin" and base.rule("equ.rarity")["origin"] == "builtin"
    _write(cfg, "10-mine.json", _doc(_rule("equ.rarity", "rarity", {"zh-CN": "品级", "en": "Grade"})))
    _write(
        cfg,
        "20-more.json",
        _doc(
            _rule("equ.rarity", "rarity", "ignored: a higher-priority file already has this id"),
            _rule("mine.extra", "my section", {"zh-CN": "我的", "en": "Mine"}),
            relations={"equipment": {"listPath": "my/equipment.lst", "source": "test"}},
        ),
    )
    rs = store.current()  # reloaded: the folder changed
    assert not rs.errors and rs.files == ["10-mine.json", "20-more.json"]
    ids = [r["id"] for r in rs.rules]
    assert ids[:2] == ["equ.rarity", "mine.extra"] and ids.count("equ.rarity") == 1
    assert localize(rs.rule("equ.rarity")["annotation"]["title"], "en") == "Grade"
    assert rs.rule("equ.rarity")["origin"] == "user:10-mine.json"
    assert rs.relations["equipment"]["listPath"] == "my/equipment.lst"
    assert rs.relations["stackable"]["origin"] == "builtin"
    assert len(rs.rules) == len(base.rules) + 1


@pytest.mark.security
def test_a_refused_file_leaves_the_builtins_and_other_files_working(tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    _write(cfg, "a-broken.json", "{ not json")
    _write(cfg, "b-bad.json", _doc(_rule("x", "rarity", "t") | {"target": {"kind": "token", "index": -1}}))
    _write(cfg, "c-good.json", _doc(_rule("good.one", "rarity", "ok")))
    fifo = cfg / USER_DIR_NAME / "d-fifo.json"
    os.mkfifo(fifo)  # a FIFO must not hang the loader
    rs = RuleStore(cfg).current()
    by_file = {e["file"]: e for e in rs.errors}
    assert by_file["a-broken.json"]["jsonPath"] == "$" and "line 1" in by_file["a-broken.json"]["message"]
    assert by_file["b-bad.json"]["jsonPath"] == "$.rules[0].target.index"
    assert "d-fifo.json" in by_file
    assert rs.files == ["c-good.json"]
    assert rs.rule("good.one")["origin"] == "user:c-good.json"
    assert rs.rule("equ.rarity")["origin"] == "builtin"


def test_search_matches_ids_titles_sections_and_enum_labels_in_any_language() -> None:
    rs = RuleStore(None).current()

    def ids(q: str, ext: str | None = None) -> list[str]:
        return [r["id"] for r, _ in rs.search(q, ext)]

    assert "equ.rarity" in ids("史诗") and "equ.rarity" in ids("epic")  # enum labels, both languages
    assert "equ.rarity" in ids("稀有度") and "equ.rarity" in ids("[rarity]")
    assert ids("skill levelup", ".equ")[:3] == [
        "equ.skill-levelup.job",
        "equ.skill-levelup",
        "equ.skill-levelup.levels",
    ]
    assert all(
        not r["match"].get("extensions") or ".skl" in r["match"]["extensions"]
        for r, _ in rs.search("", "skl")
    )
    hits = dict((r["id"], h) for r, h in rs.search("epic"))
    assert hits["equ.rarity"] == ["value 4"]
    assert ids("no such thing at all") == []
