"""The public snapshot (schema v1, docs/sage-snapshot.md): one gzip JSON file per project, written atomically.

Layout: `<data dir>/sage/snapshots/<slug>-<sha1-12>/current.json.gz`, the one it replaced as
`previous.json.gz`, and a small `meta.json` so `list_projects` need not decompress snapshots.
The shape follows the seed's §4.1 (arrays, not maps); paths of project files are relative to the project.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from deskbridge.core.folders import private_dir
from deskbridge.kinds.sage._atomic import atomic_write
from deskbridge.kinds.sage._sha1 import sha1
from deskbridge.kinds.sage.model import SageIndex
from deskbridge.kinds.sage.records import (
    R_ASSET,
    R_ATTR,
    R_COL,
    R_ELEMENT,
    R_END,
    R_KIND,
    R_LINE,
    R_TYPE,
    R_VALUE,
)
from deskbridge.kinds.sage.settings import deskbridge_dirs

TYPE_CHECKING = False  # `typing` and `json` are not loaded by a warm start (it writes no snapshot)
if TYPE_CHECKING:
    from typing import Any

SCHEMA_VERSION = 1


def project_key(project: Path) -> str:
    """`<slug>-<sha1-12>`: readable, and unique per absolute project path."""
    text = str(project)
    slug = re.sub(r"[^a-z0-9]+", "-", project.name.casefold()).strip("-")[:40] or "project"
    return f"{slug}-{sha1(text.encode()).hexdigest()[:12]}"


def snapshot_dir(project: Path, data_dir: Path | None = None) -> Path:
    return (data_dir or deskbridge_dirs().data) / "sage" / "snapshots" / project_key(project)


def snapshot_json(index: SageIndex, stale: bool = False, with_references: bool = True) -> dict[str, Any]:
    """The whole public snapshot of one index as plain JSON data."""
    assets = []
    for defs in index.by_id.values():
        for d in defs:
            streams = index.streams_of(d.file) if d.file else {}
            first = next(iter(streams.items()), (None, None))
            row: dict[str, Any] = {
                "type": d.type,
                "id": d.id,
                "file": index.display(d.file),
                "line": d.line,
                "origin": d.origin,
                "stream": first[0],
                "viaInstance": first[1] not in (None, "all"),
                "streams": streams,
            }
            if d.manifest:
                row["manifest"] = d.manifest
                row["manifestSource"] = d.source
            assets.append(row)
    references = []
    for path, rec in index.files.items() if with_references else ():
        shown = index.display(path)
        for r in rec.refs:
            for owner in index.owners(path, r) or [None]:
                site = owner[3] if owner else None
                references.append(
                    {
                        "type": r[R_TYPE],
                        "id": r[R_VALUE],
                        "file": shown,
                        "line": r[R_LINE],
                        "column": r[R_COL],
                        "endColumn": r[R_END],
                        "kind": r[R_KIND],
                        "element": r[R_ELEMENT],
                        "attribute": r[R_ATTR] or None,
                        "fromType": owner[0] if owner else None,
                        "fromId": owner[1] if owner else None,
                        "includedAt": {"file": index.display(site[0]), "line": site[1]} if site else None,
                    }
                )
    return {
        "schemaVersion": SCHEMA_VERSION,
        "project": str(index.project),
        "sdk": str(index.sdk) if index.sdk else None,
        "generatedAt": index.generated_at,
        "buildId": index.build_id,
        "phase": index.phase,
        "complete": index.complete,
        "stale": stale,
        "stats": {
            "assetCount": index.stats.get("assetCount", len(assets)),
            "referenceCount": sum(rec.ref_count for rec in index.files.values()),
            "referenceRowCount": len(references) if with_references else None,
            "defineCount": index.stats.get("defineCount", 0),
            "streamCount": len(index.streams),
            "fileCount": len(index.files),
            "diagnosticCount": len(index.all_diagnostics()),
        },
        "streams": [{"name": n, "entry": index.display(e)} for n, e in index.streams.items()],
        "assets": assets,
        "defines": [
            {
                "name": d.name,
                "value": d.value,
                "file": index.display(d.file),
                "line": d.line,
                "override": d.override,
            }
            for defs in index.defines.values()
            for d in defs
        ],
        "references": references,
        "includeGraph": [
            {
                "from": index.display(e.file),
                "kind": e.kind,
                "source": e.source,
                "line": e.line,
                "to": index.display(e.target) if e.target else None,
                "manifest": e.via_manifest or None,
            }
            for e in index.includes
        ],
        "sourceCandidates": [index.display(p) for p in index.source_candidates],
    }


_REF_ROW = (
    '{"type":%s,"id":%s,"file":%s,"line":%d,"column":%d,"endColumn":%d,"kind":%s,"element":%s,'
    '"attribute":%s,"fromType":%s,"fromId":%s,"includedAt":%s}'
)


def snapshot_text(index: SageIndex, stale: bool = False) -> str:
    """`snapshot_json` serialised, with the 60 k reference rows formatted directly: the same JSON as
    `json.dumps(snapshot_json(...))` at about half the cost, which keeps SNAP well under a second."""
    import json
    from json.encoder import encode_basestring  # type: ignore[attr-defined]

    memo: dict[str, str] = {}

    def enc(value: str | None) -> str:
        if value is None:
            return "null"
        hit = memo.get(value)
        if hit is None:
            hit = memo[value] = encode_basestring(value)
        return hit

    rows: list[str] = []
    for path, rec in index.files.items():
        shown = enc(index.display(path))
        plain = rec.root == "AssetDeclaration"
        assets = rec.assets
        for r in rec.refs:
            if plain:
                a = assets[r[R_ASSET]] if r[R_ASSET] >= 0 else None
                owners: list[Any] = [(a[0], a[1], None, None) if a else None]
            else:
                owners = index.owners(path, r) or [None]
            for owner in owners:
                site = owner[3] if owner else None
                rows.append(
                    _REF_ROW
                    % (
                        enc(r[R_TYPE]),
                        encode_basestring(r[R_VALUE]),
                        shown,
                        r[R_LINE],
                        r[R_COL],
                        r[R_END],
                        enc(r[R_KIND]),
                        enc(r[R_ELEMENT]),
                        enc(r[R_ATTR] or None),
                        enc(owner[0]) if owner else "null",
                        encode_basestring(owner[1]) if owner else "null",
                        f'{{"file":{enc(index.display(site[0]))},"line":{site[1]:d}}}' if site else "null",
                    )
                )
    body = snapshot_json(index, stale, with_references=False)
    body["stats"]["referenceRowCount"] = len(rows)
    head = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    # A key written by json.dumps cannot occur inside a string value (its quotes would be escaped).
    cut = head.rindex('"references":[]') + len('"references":[')
    return head[:cut] + ",".join(rows) + head[cut:]


def write_snapshot(index: SageIndex, stale: bool = False, data_dir: Path | None = None) -> Path:
    """Write `current.json.gz` atomically, keeping the one it replaces as `previous.json.gz`."""
    import gzip  # not at the top: a warm start imports this module for `project_key` only
    import json

    private_dir((data_dir or deskbridge_dirs().data) / "sage")  # owner-only: it describes a person's mod
    folder = snapshot_dir(index.project, data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    current = folder / "current.json.gz"
    body = snapshot_text(index, stale).encode()
    data = gzip.compress(body, compresslevel=3)
    if current.exists():
        # Hard-link then rename, so `current` never disappears, even for a moment.
        tmp_prev = folder / f".previous.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            tmp_prev.unlink()
        try:
            os.link(current, tmp_prev)
            os.replace(tmp_prev, folder / "previous.json.gz")
        except OSError:
            with contextlib.suppress(FileNotFoundError):
                tmp_prev.unlink()
    atomic_write(current, data)
    meta = {
        "schemaVersion": SCHEMA_VERSION,
        "project": str(index.project),
        "generatedAt": index.generated_at,
        "buildId": index.build_id,
        "phase": index.phase,
        "complete": index.complete,
        "stale": stale,
        "assetCount": index.stats.get("assetCount"),
        "bytes": len(data),
    }
    atomic_write(folder / "meta.json", json.dumps(meta, indent=1).encode())
    return current


def read_snapshot(project: Path, data_dir: Path | None = None, which: str = "current") -> dict[str, Any]:
    import gzip
    import json

    path = snapshot_dir(project, data_dir) / f"{which}.json.gz"
    return json.loads(gzip.decompress(path.read_bytes()))


def list_snapshots(data_dir: Path | None = None) -> list[dict[str, Any]]:
    """`meta.json` of every project with a snapshot, newest first."""
    import json

    base = (data_dir or deskbridge_dirs().data) / "sage" / "snapshots"
    out = []
    if base.is_dir():
        for folder in sorted(base.iterdir()):
            try:
                meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(meta, dict):
                meta["snapshot"] = str(folder / "current.json.gz")
                out.append(meta)
    out.sort(key=lambda m: str(m.get("generatedAt", "")), reverse=True)
    return out
