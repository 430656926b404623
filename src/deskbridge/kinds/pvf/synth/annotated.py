"""Annotation fixtures for synthetic archives (`synth(..., annotated=True)`, `deskbridge pvf synth --annotated`).

A handful of DNF-like files that carry every section the built-in annotation rules cover
(kinds/pvf/annotations/builtin.json): two `.equ` (rarity, types, jobs, base and four-dimension stats, speeds,
criticals, skill level-ups, explains, icon…), `.stk`, `.skl` registered in per-job skill lists
(`skill/swordmanskill.lst`, `skill/mageskill.lst` — the lists the contextual `skill` relation picks by the
level-up's job token), `.mob`, `.npc`, `.dgn` and quests (`n_quest/quest.lst`). Their ids (900000+) are
appended to the archive's own registries, so references resolve through real `.lst` files in both families.
Text is in the shared script dialect (docs/pvf-script-text.md); names are CJK from `content.GAME_*`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

from deskbridge.kinds.pvf.script.text import quote
from deskbridge.kinds.pvf.synth.content import GAME_HANS, GAME_HANT, LogicalFile

# registry folder → [(id, path relative to the folder)]
REGISTERED: dict[str, list[tuple[int, str]]] = {
    "equipment": [(900001, "annotated/swordman_sword.equ"), (900002, "annotated/mage_amulet.equ")],
    "stackable": [(900301, "annotated/material.stk"), (900302, "annotated/box.stk")],
    "monster": [(900401, "annotated/goblin.mob")],
    "npc": [(900501, "annotated/seria.npc")],
    "dungeon": [(900601, "annotated/grandflores.dgn")],
}
NEW_LISTS: dict[str, list[tuple[int, str]]] = {
    "skill/swordmanskill.lst": [
        (900101, "annotated/swordman/gorecross.skl"),
        (900102, "annotated/swordman/upward.skl"),
    ],
    "skill/mageskill.lst": [(900201, "annotated/mage/fireball.skl")],
    "n_quest/quest.lst": [(900701, "annotated/first.qst"), (900702, "annotated/second.qst")],
}
"""Lists the base content has none of (skill lists per job, the quest list); dir-relative paths."""


def _file(*sections: tuple[str, list[str] | str]) -> str:
    lines = ["#PVF_File"]
    for tag, values in sections:
        lines += ["", f"[{tag}]"]
        if isinstance(values, str):
            lines.append("\t" + values)
        elif values:
            lines.append("\t" + "\t".join(values))
        if tag in ("usable job", "skill levelup"):
            lines += [f"[/{tag}]"]
    return "\n".join(lines) + "\n"


def _q(s: str) -> str:
    return quote(s)


_QUOTED_TAG = re.compile(r"`(\[[^\]`\r\n]*\])`")


def fixture_files(traditional: bool = True, *, bare_tags: bool = False) -> Iterator[LogicalFile]:
    """The fixture scripts (not the registries: see `registry_lines` / `new_lists`). `bare_tags`: tag-like
    values (`[weapon]`, the level-up's job `[swordman]`) are written as tags, not strings, as nkpi archives
    store them (the nkpi vectors written by manydots/pvfVSCode: `[usable job]` `[swordman]`,
    `[attach type]` `[free]` are tag tokens)."""
    for lf in _fixture_files(traditional):
        yield LogicalFile(lf.path, lf.kind, _QUOTED_TAG.sub(r"\1", lf.text)) if bare_tags else lf


def _fixture_files(traditional: bool) -> Iterator[LogicalFile]:
    w = GAME_HANT if traditional else GAME_HANS
    yield LogicalFile(
        "equipment/annotated/swordman_sword.equ",
        "script",
        _file(
            ("name", _q(w[1] + w[3])),
            ("name2", _q("Knight Greatsword")),
            ("icon", [_q("item/equipment/weapon/sword.img"), "7"]),
            ("rarity", "4"),
            ("equipment type", _q("[weapon]")),
            ("item group name", _q("sword")),
            ("attach type", _q("[trade]")),
            ("minimum level", "50"),
            ("usable job", [_q("[swordman]"), _q("[at swordman]")]),
            ("equipment physical attack", ["800", "880"]),
            ("equipment magical attack", ["600", "660"]),
            ("separate attack", "500"),
            ("equipment physical defense", "0"),
            ("equipment magical defense", "0"),
            ("physical attack", "30"),
            ("magical attack", "20"),
            ("physical defense", "15"),
            ("magical defense", "12"),
            ("anti evil", "40"),
            ("attack speed", "5"),
            ("cast speed", "5"),
            ("physical critical hit", "3"),
            ("magical critical hit", "3"),
            ("add physical critical hit", "1"),
            ("add magical critical hit", "1"),
            ("stuck", "2"),
            ("skill levelup", [_q("[swordman]"), "900101", "2", _q("[swordman]"), "900102", "1"]),
            ("basic explain", _q("+2 " + w[12])),
            ("base explain", _q("+1 " + w[13])),
            ("detail explain", _q(w[1] + w[3] + "。")),
            ("flavor text", _q(w[19] + "。")),
            ("durability", "40"),
            ("weight", "3000"),
            ("value", "12000"),
        ),
    )
    yield LogicalFile(
        "equipment/annotated/mage_amulet.equ",
        "script",
        _file(
            ("name", _q(w[2] + w[7])),
            ("rarity", "6"),
            ("equipment type", _q("[amulet]")),
            ("item group name", _q("necklace")),
            ("attach type", _q("[account]")),
            ("minimum level", "70"),
            ("usable job", [_q("[mage]"), _q("[at mage]")]),
            ("skill levelup", [_q("[mage]"), "900201", "3"]),
            ("magical attack", "60"),
        ),
    )
    skill_common = [
        ("type", _q("[active]")),
        ("skill class", "2"),
        ("required level range", "5"),
        ("purchase cost", "30"),
        ("special purchase cost", "2"),
        ("maximum level", "70"),
        ("growtype maximum level", ["50", "50", "50", "50", "50", "50"]),
        ("skill fitness growtype", ["0", "1", "2", "3", "4", "5"]),
        ("cool time", ["3000", "3000"]),
        ("consume MP", ["17", "170"]),
        ("casting time", "0"),
        ("icon", [_q("character/swordman/effect/skillicon.img"), "12"]),
    ]
    yield LogicalFile(
        "skill/annotated/swordman/gorecross.skl",
        "script",
        _file(
            ("name", _q(w[12])),
            ("name2", _q("Gore Cross")),
            ("required level", "15"),
            *skill_common,
            ("pre required skill", ["900102", "1"]),
            ("command", [_q("(LEFT)"), _q("(RIGHT)"), _q("(SKILL)")]),
            ("consume item", ["900301", "1"]),
            ("explain", _q(w[12] + "。")),
        ),
    )
    yield LogicalFile(
        "skill/annotated/swordman/upward.skl",
        "script",
        _file(("name", _q(w[13])), ("required level", "5"), *skill_common),
    )
    yield LogicalFile(
        "skill/annotated/mage/fireball.skl",
        "script",
        _file(("name", _q(w[15])), ("required level", "10"), *skill_common),
    )
    yield LogicalFile(
        "stackable/annotated/material.stk",
        "script",
        _file(
            ("name", _q(w[9])),
            ("name2", _q("Ore")),
            ("explain", _q(w[9] + "。")),
            ("grade", "1"),
            ("rarity", "1"),
            ("stackable type", [_q("[material]"), "0"]),
            ("stack limit", "1000"),
            ("price", "50"),
            ("cash", "0"),
            ("minimum level", "1"),
            ("usable job", _q("[all]")),
            ("attach type", _q("[free]")),
            ("weight", "10"),
            ("icon", [_q("item/stackable/material.img"), "3"]),
            ("cool time", "0"),
            ("need material", ["900302", "2"]),
            ("consume item", ["900302", "1"]),
        ),
    )
    yield LogicalFile(
        "stackable/annotated/box.stk",
        "script",
        _file(
            ("name", _q(w[8])),
            ("rarity", "2"),
            ("input item", ["900301", "1"]),
            ("output item", ["900001", "1"]),
        ),
    )
    yield LogicalFile(
        "monster/annotated/goblin.mob",
        "script",
        _file(
            ("name", _q(w[10])),
            ("level", "10"),
            ("category", [_q("[goblin]"), _q("[short range]")]),
            ("ability category", [_q("[HP MAX]"), "1000", _q("[EQUIPMENT_PHYSICAL_ATTACK]"), "80"]),
            ("weight", "5000"),
            ("floating height", "0"),
            ("attack speed", "800"),
            ("cast speed", "800"),
            ("move speed", "900"),
            ("hit recovery", "500"),
            ("sight", "400"),
            ("vision", "300"),
            ("warlike", "50"),
            ("attack delay", "1500"),
            ("think term", "600"),
            ("ai pattern", _q("monster/goblin/ai/pattern.ai")),
            ("attack info", _q("monster/goblin/attackinfo/attack.atk")),
            ("face image", [_q("monster/goblin/face.img"), "0"]),
        ),
    )
    yield LogicalFile("npc/annotated/seria.npc", "script", _file(("name", _q(w[17]))))
    yield LogicalFile(
        "dungeon/annotated/grandflores.dgn",
        "script",
        _file(
            ("name", _q(w[21])),
            ("explain", _q(w[21] + "。")),
            ("minimum required level", "1"),
            ("basis level", "3"),
            ("evil", "0"),
            ("required item", ["900301", "1", "0"]),
            ("entering title", _q("dungeon/grandflores/title.ani")),
            ("cutscene image", [_q("map/cutscene/grandflores.img"), "0"]),
            ("minimap image", [_q("map/minimap/grandflores.img"), "0"]),
            ("maze info", ["3", "3"]),
        ),
    )
    yield LogicalFile(
        "n_quest/annotated/first.qst",
        "script",
        _file(
            ("name", _q(w[20])),
            ("grade", _q("[common unique]")),
            ("type", _q("[meet npc]")),
            ("int data", "900501"),
            ("npc index", "900501"),
            ("complete npc index", "900501"),
            ("pre required quest", "900702"),
            ("level", ["1", "10"]),
            ("job", _q("[all]")),
        ),
    )
    yield LogicalFile(
        "n_quest/annotated/second.qst",
        "script",
        _file(("name", _q(w[19])), ("type", _q("[seeking]")), ("int data", ["900301", "5"])),
    )


def registry_entries(folder: str, root_lists: bool) -> list[tuple[int, str]]:
    """The fixture entries to append to the `folder` registry (root-relative when `root_lists`)."""
    return [(i, f"{folder}/{rel}" if root_lists else rel) for i, rel in REGISTERED.get(folder, [])]


def new_lists(root_lists: bool) -> Iterator[LogicalFile]:
    """The lists the base content lacks; the quest list moves to `list/` when `root_lists` (110US)."""
    for path, entries in NEW_LISTS.items():
        folder = path.rsplit("/", 1)[0]
        if root_lists and folder == "n_quest":
            path = "list/quest.lst"
            entries = [(i, f"{folder}/{rel}") for i, rel in entries]
        yield LogicalFile(path, "lst", "#PVF_File\n" + "".join(f"{i}\t{quote(p)}\n" for i, p in entries))


def with_fixtures(
    files: Iterator[LogicalFile], *, traditional: bool, root_lists: bool
) -> Iterator[LogicalFile]:
    """The base content with the fixture entries appended to its registries, then the fixture files."""
    for lf in files:
        if lf.kind == "lst" and lf.path != "n_string.lst":
            folder = posixpath.basename(lf.path)[:-4] if root_lists else lf.path.split("/")[0]
            extra = registry_entries(folder, root_lists)
            if extra:
                lf = LogicalFile(lf.path, lf.kind, lf.text + "".join(f"{i}\t{quote(p)}\n" for i, p in extra))
        yield lf
    yield from fixture_files(traditional)
    yield from new_lists(root_lists)
