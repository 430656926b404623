"""Read a BinaryAssetBuilder project file (`*.babproj`): extra streams and the manifests of referenced streams.

Shape (research/sage.md §2.4, xan105/RA3-Mod-UpheavalEx `mod.babproj`): `<BinaryAssetBuilderProject
xmlns="urn:xmlns:ea.com:babproject">` → `<Stream Source="…\\data\\mod.xml">` → `<Configuration>` →
`<StreamReference ReferenceName="static.xml" ReferenceManifest="…\\BuiltMods\\sagexml\\static.manifest"/>`.
BAB uses a reference's manifest when the include's path ends with `ReferenceName`. The paths are absolute
Windows paths from the modder's machine, so they are mapped onto this machine by their longest suffix
that exists under the project or the SDK.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from deskbridge.kinds.sage._lxml import etree
from deskbridge.kinds.sage.paths import CaseFoldTree, split_source

BABPROJ_MAX_BYTES = 4 * 1024 * 1024
"""A project file is a few kilobytes; anything this large is not one."""


@dataclass
class BabStream:
    source: str
    """As written (usually an absolute Windows path)."""
    references: list[tuple[str, str]] = field(default_factory=list)
    """(ReferenceName, ReferenceManifest) pairs of the stream's default configuration."""


def parse_babproj(data: bytes) -> list[BabStream]:
    """The streams of a project file; malformed or oversized input yields what could be read, never raises."""
    if len(data) > BABPROJ_MAX_BYTES or not data.strip():
        return []
    parser = etree.XMLParser(recover=True, resolve_entities=False, no_network=True, remove_comments=True)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError:
        return []
    if root is None:
        return []
    streams: list[BabStream] = []
    for el in root.iter(tag=etree.Element):
        name = el.tag.rpartition("}")[2] if isinstance(el.tag, str) else ""
        if name == "Stream" and el.get("Source"):
            streams.append(BabStream(source=el.get("Source", "")))
        elif (
            name == "StreamReference" and streams and el.get("ReferenceName") and el.get("ReferenceManifest")
        ):
            streams[-1].references.append((el.get("ReferenceName", ""), el.get("ReferenceManifest", "")))
    return streams


def map_foreign_path(raw: str, roots: list[str], tree: CaseFoldTree) -> str | None:
    """The file on this machine that an absolute path from another machine names: the longest tail of its
    components that exists under one of `roots` (`G:\\RA3 MOD SDK\\BuiltMods\\x.manifest` → `<sdk>/BuiltMods/x.manifest`)."""
    parts = [p for p in split_source(raw) if p and not p.endswith(":")]
    for k in range(len(parts), 0, -1):
        tail = parts[-k:]
        for root in roots:
            hit = tree.find(root, tail)
            if hit and tree.is_file(hit):
                return hit
    return None
