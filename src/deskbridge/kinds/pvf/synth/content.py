"""Deterministic DNF-like logical content for synthetic archives: paths + editable text, family-neutral.

`generate_content(files, seed)` yields `LogicalFile`s whose text is in the shared script dialect
(docs/pvf-script-text.md): item scripts with section trees, ints, floats, backtick strings (CJK), typed
tokens and `<id::key``>` string links; `.lst` registries (`id TAB `path``, directory-relative unless
`root_lists`); `n_string.lst`; `.str` tables (`key>value`, CRLF); a few `.nut` texts. A family writer
compiles them (classic: `synth/classic.py`). Same (files, seed, options) → same content, always.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from deskbridge.kinds.pvf.script.text import quote

HANT = (
    "的一是不了人在有這中大來上國個到說們為子和地出道也時年得就那要下以生會自著去之過家學對可裡後小心多天"
    "而能好都然沒日於起還發成事只作當想看文無開手十用主行方又如前所本見經頭面公同三已老從動兩長知民樣現分將外"
)
HANS = (
    "的一是不了人在有这中大来上国个到说们为子和地出道也时年得就那要下以生会自着去之过家学对可里后小心多天"
    "而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外"
)
GAME_HANT = [
    "破舊的",
    "騎士",
    "魔法",
    "長劍",
    "短劍",
    "布甲",
    "皮革",
    "護身符",
    "藥水",
    "礦石",
    "哥布林",
    "牛頭怪",
    "鬼斬",
    "上挑",
    "裂波斬",
    "火球",
    "冰牆",
    "賽麗亞",
    "林納斯",
    "赫頓瑪爾",
    "天空之城",
    "格蘭之森",
]
GAME_HANS = [
    "破旧的",
    "骑士",
    "魔法",
    "长剑",
    "短剑",
    "布甲",
    "皮革",
    "护身符",
    "药水",
    "矿石",
    "哥布林",
    "牛头怪",
    "鬼斩",
    "上挑",
    "裂波斩",
    "火球",
    "冰墙",
    "赛丽亚",
    "林纳斯",
    "赫顿玛尔",
    "天空之城",
    "格兰之森",
]

HANGUL = "이다는의에을하고가기지서한로리사자어도있수를그대아나시것인게요니해들정주면보일전스라까만경"
GAME_KR = [
    "낡은",
    "기사",
    "마법",
    "장검",
    "단검",
    "천갑옷",
    "가죽",
    "부적",
    "물약",
    "광석",
    "고블린",
    "타우",
    "귀참",
    "어퍼",
    "파동검",
    "화염구",
    "얼음벽",
    "세리아",
    "린우드",
    "헨돈마이어",
    "하늘성",
    "그란플로리스",
]
KANA_KANJI = "のにはをたがでてとしれさあいうえおかきくけこアイウエオカキクケコ剣盾魔法騎士薬草石火氷森城"
GAME_JP = [
    "古びた",
    "騎士",
    "魔法",
    "長剣",
    "短剣",
    "布の鎧",
    "革",
    "お守り",
    "薬",
    "鉱石",
    "ゴブリン",
    "タウ",
    "鬼斬り",
    "アッパー",
    "波動剣",
    "火球",
    "氷壁",
    "セリア",
    "リンウッド",
    "ヘンドンマイア",
    "天空の城",
    "グランの森",
]
GB18030_ONLY = "㐀㛃䲜𠮷"
"""Simplified-Chinese characters GBK (code page 936) lacks and GB 18030 writes as four-byte sequences (CJK
extension A: 㐀 U+3400, 㛃 U+36C3, 䲜 U+4C9C; extension B: 𠮷 U+20BB7): a gb18030 pack's text needs them."""
LANGUAGES: dict[str, tuple[str, list[str]]] = {
    "hant": (HANT, GAME_HANT),
    "hans": (HANS, GAME_HANS),
    "hans-gb18030": (HANS + GB18030_ONLY * 8, [*GAME_HANS, "𠮷祥之剑", "䲜鱼药水", "㛃的护身符"]),
    "ko": (HANGUL, GAME_KR),
    "ja": (KANA_KANJI, GAME_JP),
}
"""Filler text per language: each set is text its pack's code page can hold (Traditional Chinese for 950,
Simplified for 936/UTF-8, Simplified with characters only GB 18030 holds for gb18030, Hangul for 949, kana and
kanji for 932)."""

# folder: (extension, share of the files, sub-folders, registry name)
FOLDERS: dict[str, tuple[str, float, list[str], str]] = {
    "equipment": (
        "equ",
        0.40,
        [
            "character/swordman/weapon",
            "character/mage/coat",
            "character/fighter/shoes",
            "character/gunner/pants",
            "character/priest/belt",
            "character/common/amulet",
        ],
        "equipment.lst",
    ),
    "stackable": ("stk", 0.20, ["potion", "material", "quest", "cash"], "stackable.lst"),
    "skill": ("skl", 0.10, ["swordman", "mage", "fighter", "gunner", "priest"], "skill.lst"),
    "monster": ("mob", 0.12, ["goblin", "tau", "lugaru", "ghost"], "monster.lst"),
    "dungeon": ("dgn", 0.05, ["grandflores", "skytower", "darkelven"], "dungeon.lst"),
    "npc": ("npc", 0.05, ["hendonmyre", "westcoast"], "npc.lst"),
    "etc": ("etc", 0.08, ["randomoption", "itemdrop", "shop"], "etc.lst"),
}
STR_NAME = "{folder}/{folder}.chn.str"

SECTIONS = {
    "equipment": [
        "[grade]",
        "[rarity]",
        "[minimum level]",
        "[price]",
        "[weight]",
        "[durability]",
        "[physical attack]",
        "[magical attack]",
        "[physical defense]",
        "[magical defense]",
        "[HP MAX]",
        "[MP MAX]",
        "[attack speed]",
        "[move speed]",
        "[cast speed]",
        "[hit recovery]",
        "[stuck]",
    ],
    "stackable": ["[grade]", "[rarity]", "[price]", "[stack limit]", "[cool time]", "[weight]", "[value]"],
    "skill": [
        "[required level]",
        "[maximum level]",
        "[skill class]",
        "[cool time]",
        "[consume MP]",
        "[casting time]",
        "[growtype maximum level]",
    ],
    "monster": ["[level]", "[move speed]", "[attack speed]", "[weight]", "[sight]", "[warlike]", "[HP MAX]"],
    "dungeon": ["[minimum level]", "[maximum level]", "[map count]", "[difficulty]", "[clear reward]"],
    "npc": ["[position]", "[field direction]", "[sight]", "[shop index]"],
    "etc": ["[probability]", "[count]", "[rate]", "[value]"],
}
ATTR_TAGS = [
    "[physical attack]",
    "[magical attack]",
    "[HP MAX]",
    "[MP MAX]",
    "[strength]",
    "[intelligence]",
    "[vitality]",
    "[spirit]",
    "[fire resistance]",
    "[water resistance]",
]
TYPE_TAGS = {
    "equipment": ["[weapon]", "[coat]", "[shoes]", "[pants]", "[belt]", "[amulet]"],
    "stackable": ["[recover hp]", "[recover mp]", "[material]", "[quest]", "[cash]"],
    "skill": ["[active]", "[passive]"],
    "monster": ["[normal]", "[named]", "[boss]"],
    "dungeon": ["[normal]", "[hell]"],
    "npc": ["[merchant]", "[quest]"],
    "etc": ["[table]"],
}
JOBS = ["[swordman]", "[mage]", "[fighter]", "[gunner]", "[priest]", "[thief]"]


@dataclass(frozen=True, slots=True)
class LogicalFile:
    """One file of the synthetic tree: archive path, kind ("script" | "lst" | "str" | "nut") and text."""

    path: str
    kind: str
    text: str


class _Words:
    def __init__(self, rng: random.Random, language: str) -> None:
        self.rng = rng
        self.chars, self.game = LANGUAGES[language]

    def name(self) -> str:
        r = self.rng
        return r.choice(self.game) + "".join(r.choice(self.chars) for _ in range(r.randint(1, 3)))

    def sentence(self) -> str:
        r = self.rng
        return "".join(r.choice(self.chars) for _ in range(r.randint(6, 18))) + "。"


def _float(rng: random.Random) -> str:
    """Float text with the mandatory '.' — quarter steps, tenths or three decimals."""
    choice = rng.random()
    if choice < 0.4:
        return repr(rng.randint(-40, 400) / 4)
    if choice < 0.7:
        return f"{rng.randint(0, 100) / 10:.1f}"
    return f"{rng.uniform(-1000, 1000):.3f}"


def _script(rng: random.Random, words: _Words, folder: str, table_id: int, key: str, links: bool) -> str:
    lines = ["#PVF_File", "", "[name]"]
    lines.append(f"\t<{table_id}::{key}``>" if links else "\t" + quote(words.name()))
    lines += ["", "[name2]", "\t" + quote(f"{folder.title()} item {key}")]
    for tag in rng.sample(SECTIONS[folder], k=min(len(SECTIONS[folder]), rng.randint(5, 10))):
        n = rng.choice((1, 1, 1, 2, 3, 5))
        vals = [_float(rng) if rng.random() < 0.25 else str(rng.randint(-50, 9000)) for _ in range(n)]
        lines += ["", tag, "\t" + "\t".join(vals)]
    lines += ["", "[type]", "\t" + quote(rng.choice(TYPE_TAGS[folder])) + "\t" + str(rng.randint(0, 9))]
    if folder in ("equipment", "skill"):
        lines += ["", "[usable job]"]
        lines += ["\t" + quote(j) for j in rng.sample(JOBS, rng.randint(1, 3))]
        lines += ["", "[/usable job]"]
    if rng.random() < 0.6:
        lines += ["", "[if equip]"]
        for tag in rng.sample(ATTR_TAGS, rng.randint(2, 5)):
            lines.append("\t" + quote(tag) + "\t" + str(rng.randint(-20, 300)))
        lines += ["", "[/if equip]"]
    levels = rng.randint(20, 60)
    lines += [
        "",
        "[level property]",
        "\t"
        + "\t".join(
            repr(rng.randint(0, 4000) / 8) if i % 3 == 2 else str(rng.randint(0, 999))
            for i in range(levels * 3)
        ),
    ]
    lines += ["", "[command]", "\t{6=`up`}\t{6=`attack`}\t{8=`->`}\t{3=" + str(rng.randint(0, 255)) + "}"]
    lines += [
        "",
        "[explain]",
        "\t" + quote(words.sentence() + ("\n" + words.sentence() if rng.random() < 0.3 else "")),
    ]
    return "\n".join(lines) + "\n"


def plan_counts(files: int) -> dict[str, int]:
    """Item files per folder for a total of `files` (registries, .str, n_string.lst and extras excluded)."""
    fixed = 1 + 2 * len(FOLDERS) + 2 + 1  # n_string.lst, a .lst + .str per folder, 2 .nut, stringtable.bin
    items = max(0, files - fixed)
    counts = {f: int(items * share) for f, (_, share, _, _) in FOLDERS.items()}
    counts["equipment"] += items - sum(counts.values())
    return counts


def generate_content(
    files: int,
    seed: int,
    *,
    traditional: bool = True,
    links: bool = True,
    root_lists: bool = False,
    language: str | None = None,
) -> Iterator[LogicalFile]:
    """Yield `files - 1` logical files (the family writer adds its own string table as the last one).
    `language` ("hant", "hans", "hans-gb18030", "ko", "ja") picks the filler text; default by `traditional`."""
    rng = random.Random(seed)
    words = _Words(rng, language or ("hant" if traditional else "hans"))
    counts = plan_counts(files)
    folders = list(FOLDERS)
    nstring = [STR_NAME.format(folder=f).title().replace(".Chn.Str", ".chn.str") for f in folders]
    yield LogicalFile(
        "n_string.lst", "lst", "#PVF_File\n" + "".join(f"{i}\t{quote(p)}\n" for i, p in enumerate(nstring))
    )
    for table_id, folder in enumerate(folders):
        ext, _, subdirs, lst_name = FOLDERS[folder]
        registry: list[str] = []
        strings: list[str] = ["// synthetic string table\r\n"]
        for n in range(counts[folder]):
            sub = subdirs[n % len(subdirs)]
            rel = f"{sub}/{folder}_{n:06d}.{ext}"
            path = f"{folder}/{rel}"
            key = f"name_{n}"
            strings.append(f"{key}>{words.name()}\r\n")
            registry.append(path if root_lists else rel)
            yield LogicalFile(path, "script", _script(rng, words, folder, table_id, key, links))
        yield LogicalFile(STR_NAME.format(folder=folder), "str", "".join(strings))
        lst_path = f"list/{lst_name}" if root_lists else f"{folder}/{lst_name}"
        yield LogicalFile(
            lst_path,
            "lst",
            "#PVF_File\n" + "".join(f"{1000 + i}\t{quote(p)}\n" for i, p in enumerate(registry)),
        )
    for name in ("common", "loadstate"):
        yield LogicalFile(
            f"sqr/{name}.nut",
            "nut",
            f"// {name} script\nfunction sq_{name}(obj)\n{{\n\treturn obj.getLevel();\n}}\n",
        )
