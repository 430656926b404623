"""Walk a mod's streams through their includes and assemble a `SageIndex` from per-file records.

Stream and include semantics follow BAB (research/sage.md §2.2, §2.4): the static stream starts at
`Data/Mod.xml`; each `Data/additionalmaps/mapmetadata_*.xml` starts a `global:<name>` stream; `all`
pulls a document into the stream, `instance` makes it visible without emitting it, `reference` names an
external stream — read from its compiled `.manifest` when the SDK has one, otherwise walked as visible
only. Defines merge through every include kind; a define seen again from another document without
`override="true"` is a `duplicate-define`.
"""

from __future__ import annotations

import gc
import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from deskbridge.kinds.sage._trace import mark
from deskbridge.kinds.sage.model import (
    MODE_RANK,
    SPLICED_ROOT,
    AssetDef,
    DefineDef,
    Diagnostic,
    IncludeEdge,
    SageIndex,
    display_path,
)
from deskbridge.kinds.sage.paths import OUTSIDE, CaseFoldTree, PathResolver
from deskbridge.kinds.sage.project import is_sdk
from deskbridge.kinds.sage.records import R_VALUE, RECORD_CODES, FileRecords
from deskbridge.kinds.sage.schema import SchemaModel
from deskbridge.kinds.sage.store import RecordStore, is_art

TYPE_CHECKING = False  # `typing` is not loaded by a warm start
if TYPE_CHECKING:
    from typing import Any

BABPROJ_MAX_BYTES = 4 * 1024 * 1024
MANIFEST_MAX_BYTES = 256 * 1024 * 1024
"""Compiled manifests hold only asset tables (Uprising's static one lists 13,872 assets)."""
MAX_INCLUDE_DEPTH = 300
"""Deeper include chains are reported as `include-cycle` (the extension's limit)."""

MAPMETADATA = re.compile(r"^mapmetadata_.*\.xml$", re.IGNORECASE)

Progress = Callable[[int, int, str], None]


def _now_iso() -> str:
    """UTC now as `2026-01-02T03:04:05.678Z`, without importing `datetime` on the warm path."""
    ns = time.time_ns()
    seconds, rest = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{rest // 1_000_000:03d}Z"


def _no_progress(done: int, total: int, message: str) -> None:
    return None


def babproj_files(project: Path, tree: CaseFoldTree) -> list[str]:
    listing = tree.listing(str(project)) or {}
    return sorted(
        os.path.join(str(project), name)
        for name, is_dir in set(listing.values())
        if not is_dir and name.casefold().endswith(".babproj")
    )


def stream_entries(project: Path, tree: CaseFoldTree) -> dict[str, str]:
    """`static` → Data/Mod.xml (WrathEd's layout: Data/Static.xml when there is no Mod.xml) and
    `global:<name>` → each additionalmaps/mapmetadata_*.xml, if present. A mod SDK opened as the project
    has the game's own streams instead: `static`, `global` and `audio` from SageXml/."""
    out: dict[str, str] = {}
    mod = tree.find(str(project), ["data", "mod.xml"])
    if not (mod and tree.is_file(mod)):
        mod = tree.find(str(project), ["data", "static.xml"])
    if mod and tree.is_file(mod):
        out["static"] = mod
    maps = tree.find(str(project), ["data", "additionalmaps"])
    listing = tree.listing(maps) if maps else None
    if maps and listing:
        for name, is_dir in sorted(set(listing.values())):
            if not is_dir and MAPMETADATA.match(name):
                out[f"global:{name[:-4]}"] = os.path.join(maps, name)
    if not out and is_sdk(project):
        sagexml = tree.find(str(project), ["sagexml"])
        for stream in ("static", "global", "audio"):
            hit = tree.find(sagexml, [stream + ".xml"]) if sagexml else None
            if hit and tree.is_file(hit):
                out[stream] = hit
    return out


class IndexBuilder:
    """Builds indexes for one project; holds the resolver and the record store between builds."""

    def __init__(
        self,
        project: Path,
        sdk: Path | None,
        resolver: PathResolver,
        store: RecordStore,
        model: Callable[[], SchemaModel | None],
        adopt_model: Callable[[SchemaModel | None], None] | None = None,
        loaded_model: Callable[[], SchemaModel | None] | None = None,
    ) -> None:
        self.project = project
        self.sdk = sdk
        self.resolver = resolver
        self.store = store
        self.model = model
        self.adopt_model = adopt_model
        """Takes a model compiled elsewhere (`parallel.prefetch` compiles it in a process of its own)."""
        self.loaded_model = loaded_model or (lambda: None)
        """The model when it is in memory already (then nothing needs compiling)."""
        self.last_file_count = 0
        self.babproj_refs: list[tuple[str, str]] = []
        self.read_errors: list[tuple[str, str]] = []

    def display(self, path: str) -> str:
        """`path` as the index shows it (`SageIndex.display`): `Data/…` inside the project, else absolute."""
        return display_path(self.project, path)

    def _read_babproj(self, entries: dict[str, str]) -> None:
        """Streams and reference manifests declared by the project's `*.babproj`, mapped onto this machine."""
        self.babproj_refs = []
        tree = self.resolver.tree
        roots = [str(self.project), str(self.project.parent)] + ([str(self.sdk)] if self.sdk else [])
        for path in babproj_files(self.project, tree):
            # Imported here: a mod without a `.babproj` (and every warm start of one) never parses one.
            from deskbridge.kinds.sage.babproj import map_foreign_path, parse_babproj

            data = self._read(path, BABPROJ_MAX_BYTES)
            if data is None:
                continue
            scope = self.resolver.scope
            for stream in parse_babproj(data):
                source = map_foreign_path(stream.source, roots, tree)
                if source and scope is not None and not scope.contains(source):
                    source = None
                if source and source not in entries.values():
                    entries[f"babproj:{Path(source).stem}"] = source
                for name, manifest in stream.references:
                    mapped = map_foreign_path(manifest, roots, tree)
                    if mapped and (scope is None or scope.contains(mapped)):
                        self.babproj_refs.append((name.replace("\\", "/").casefold(), mapped))

    def _read(self, path: str, max_bytes: int) -> bytes | None:
        """A babproj's or manifest's bytes through the bounded regular-file read (None when refused)."""
        from deskbridge.core.errors import BridgeError  # with `typing`: not on the warm path
        from deskbridge.core.reading import read_regular_file

        try:
            return read_regular_file(path, max_bytes=max_bytes, shown_as=self.store._shown(path))
        except BridgeError as exc:
            self.read_errors.append((path, exc.message))
            return None

    # --- walking ----------------------------------------------------------------------------------
    def build(self, build_id: int, with_art: bool, progress: Progress = _no_progress) -> SageIndex:
        t0 = time.perf_counter()
        parsed0, hits0, calls0 = self.store.parsed, self.store.cache_hits, self.resolver.calls
        walk = _Walk(self, with_art, progress)
        self.read_errors = []
        entries = stream_entries(self.project, self.resolver.tree)
        self._read_babproj(entries)
        scope = self.resolver.scope
        for name, entry in list(entries.items()):
            if scope is not None and not scope.contains(entry):
                del entries[name]
                walk.diag(
                    entry,
                    0,
                    "include-outside-roots",
                    "error",
                    f"the {name} stream's entry leads outside the mod and SDK folders; not read",
                )
        if not entries:
            walk.diag(
                "",
                0,
                "no-entry",
                "error",
                "The project has no Data/Mod.xml and no Data/additionalmaps/mapmetadata_*.xml.",
            )
        if self.sdk is None:
            walk.diag(
                "",
                0,
                "sdk-not-configured",
                "info",
                "No mod SDK configured: vanilla includes (DATA:static.xml …) cannot be resolved. "
                "Pass --sdk or set DESKBRIDGE_SAGE_SDK.",
            )
        prefetched: set[str] = set()
        forked = False
        if self.store.empty() and entries:
            from deskbridge.kinds.sage import parallel  # multiprocessing: only a cold build needs it
        if self.store.empty() and entries and parallel.usable():
            # A cold build: parse the files the walk will need on every core first, while the model compiles.
            forked = True
            prefetched = parallel.prefetch(
                self.store,
                self.model,
                list(entries.values()),
                self._links,
                lambda: self._project_xml(),
                is_art,
                with_art,
                adopt=self.adopt_model,
                loaded=self.loaded_model(),
            )
        for stream, entry in entries.items():
            walk.stream(stream, entry)
        for path, message in self.read_errors:
            walk.diag(path, 0, "unreadable-file", "error", message)
        for path, line, message in self.store.extras.get("schemaProblems") or ():
            walk.diag(path, line, "schema-error", "error", message)
        t_walk = time.perf_counter()
        mark("walked")
        index = SageIndex(
            project=self.project,
            sdk=self.sdk,
            build_id=build_id,
            generated_at=_now_iso(),
            phase="art" if with_art else "xml",
            complete=with_art or not walk.art_pending,
            model_loader=self.model,
            streams=entries,
            scope=self.resolver.scope,
        )
        _assemble(index, walk)
        mark("assembled")
        if forked:
            parallel.reap()  # the workers' exits, torn down by the kernel meanwhile
        index.deferred_art = sorted(walk.art_pending)
        index.source_candidates = self._source_candidates(index)
        self.last_file_count = len(index.files)
        index.stats.update(
            indexedFiles=len(index.files),
            parsedFiles=self.store.parsed - parsed0 - len(prefetched - index.files.keys()),
            recordsCacheHits=self.store.cache_hits - hits0,
            shallowScannedFiles=sum(1 for r in index.files.values() if r.shallow),
            deferredArtFiles=len(index.deferred_art),
            resolveCalls=self.resolver.calls - calls0,
            streamCount=len(entries),
            manifestAssetCount=len(walk.manifest_assets),
            suppressedIncludeNotFound=walk.suppressed,
            walkMs=round((t_walk - t0) * 1000, 1),
            elapsedMs=round((time.perf_counter() - t0) * 1000, 1),
        )
        self.index_inactive(index, index.source_candidates)
        index.stats["inactiveFiles"] = len(index.inactive_files)
        progress(len(index.files), len(index.files), f"indexed {len(index.files)} files")
        return index

    def _links(self, path: str, rec: FileRecords) -> list[str]:
        """The files a parsed file leads the walk to (includes and `xi:include`s, not manifest-backed
        references) — what `parallel.prefetch` parses next."""
        out = []
        resolve = self.resolver.resolve_checked
        for kind, source, _line in rec.includes:
            target = resolve(source, path)
            if target is None or target == OUTSIDE:
                continue
            if kind == "reference" and self.manifest_for(target, source):
                continue
            out.append(target)
        for href, _x, _line, _nested in rec.xincludes:
            target = resolve(href, path)
            if target is not None and target != OUTSIDE:
                out.append(target)
        return out

    def _project_xml(self) -> list[str]:
        """Every `.xml` file of the project (the inactive ones are indexed too)."""
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.project):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            out.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.casefold().endswith(".xml"))
        return out

    def index_inactive(self, index: SageIndex, paths: list[str]) -> None:
        """Definitions in files no stream includes, as `origin: inactive` (issue 12)."""
        for path in paths:
            rec = self.store.get(path)
            if rec is None:
                index.inactive_files.pop(path, None)
                continue
            index.inactive_files[path] = rec
        inactive: dict[str, list[AssetDef]] = {}
        for path, rec in index.inactive_files.items():
            for i, (atype, aid, line) in _file_assets(rec, None):
                inactive.setdefault(aid.casefold(), []).append(
                    AssetDef(atype, aid, path, line, "inactive", i)
                )
        index.inactive = inactive

    def _source_candidates(self, index: SageIndex) -> list[str]:
        """Project XML files no stream reaches: candidates for a missing include (or leftovers)."""
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.project):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for f in sorted(filenames):
                if f.casefold().endswith(".xml"):
                    p = os.path.join(dirpath, f)
                    if p not in index.files:
                        out.append(p)
        return out

    def manifest_for(self, target: str, source: str = "") -> str | None:
        """The compiled manifest of a referenced stream: the `.babproj` StreamReference whose name ends the
        include's path (BAB's rule), else the SDK's `BuiltMods/SageXml/<name>.manifest`."""
        written = source.replace("\\", "/").casefold()
        for name, manifest in self.babproj_refs:
            if written.endswith(name):
                return manifest
        if self.sdk is None:
            return None
        stem = os.path.splitext(os.path.basename(target))[0]
        tree = self.resolver.tree
        for parts in (["builtmods", "sagexml", stem + ".manifest"], ["builtmods", stem + ".manifest"]):
            hit = tree.find(str(self.sdk), parts)
            if hit and tree.is_file(hit):
                scope = self.resolver.scope
                return hit if scope is None or scope.contains(hit) else None
        return None


class _Walk:
    """State of one walk over all streams."""

    def __init__(self, builder: IndexBuilder, with_art: bool, progress: Progress) -> None:
        self.b = builder
        self.with_art = with_art
        self.progress = progress
        self.files: dict[str, FileRecords] = {}
        self.membership: dict[str, dict[str, str]] = {}
        self.edges: list[tuple[str, str, str, int, str | None, str]] = []
        """`IncludeEdge` fields, made into edges with the tables (5.5 k on RA3Afterdash)."""
        self.diagnostics: list[tuple[str, int, str, str, str]] = []
        """(file, line, code, severity, message): `Diagnostic`s are made with the tables (`_tables`)."""
        self.fragment_owners: dict[str, list[tuple[str, int, int]]] = {}
        self.manifest_assets: list[AssetDef] = []
        self.manifests_loaded: dict[str, list[AssetDef] | None] = {}
        self.art_pending: set[str] = set()
        self.splices: dict[str, str] = {}
        self.suppressed = 0
        self._edges_done: set[str] = set()
        self._chain: list[str] = []
        self._visited: dict[str, int] = {}
        self._stream = ""

    def diag(self, file: str, line: int, code: str, severity: str, message: str) -> None:
        self.diagnostics.append((file, line, code, severity, message))

    def stream(self, name: str, entry: str) -> None:
        self._stream = name
        self._visited = {}
        self._visit(entry, "all")

    def _visit(self, path: str, mode: str) -> None:
        rank = MODE_RANK[mode]
        prev = self._visited.get(path)
        if prev is not None and prev <= rank:
            return
        self._visited[path] = rank
        streams = self.membership.setdefault(path, {})
        if self._stream not in streams or MODE_RANK[streams[self._stream]] > rank:
            streams[self._stream] = mode
        if is_art(path) and not self.with_art:
            self.art_pending.add(path)
            return
        rec = self.files.get(path)
        if rec is None:
            rec = self.b.store.get(path)
            if rec is None:
                why = self.b.store.errors.get(path)
                if why == "include-outside-roots":
                    self.diag(
                        path, 0, why, "error", "the file leads outside the mod and SDK folders; not read"
                    )
                elif why:
                    self.diag(path, 0, "unreadable-file", "error", why)
                else:
                    self.diag(path, 0, "include-not-found", "warning", "the file vanished while indexing")
                return
            self.files[path] = rec
            if len(self.files) % 100 == 0:
                self.progress(
                    len(self.files),
                    max(self.b.last_file_count, len(self.files)),
                    f"read {len(self.files)} files",
                )
        first_time = path not in self._edges_done
        self._edges_done.add(path)
        self._chain.append(path)
        try:
            for kind, source, line in rec.includes:
                if kind not in ("all", "instance", "reference"):
                    if first_time:
                        self.diag(
                            path,
                            line,
                            "invalid-include-type",
                            "error",
                            f"Include type {kind!r} is not one of all, instance, reference",
                        )
                    kind = "all"
                child_mode = mode if kind == "all" else ("instance" if mode == "all" else mode)
                if kind == "reference":
                    child_mode = "reference"
                self._follow(path, kind, source, line, child_mode, first_time)
            for href, xpointer, line, nested in rec.xincludes:
                owners: list[tuple[str, int, int]] = []
                if first_time:
                    if rec.root != "AssetDeclaration":
                        # A fragment including a fragment: its content belongs to whoever includes us
                        # (resolved at query time, so an includer seen later still counts).
                        owners = [(path, -1, line)]
                    elif nested and (owner := _asset_at(rec, line)) >= 0:
                        owners = [(path, owner, line)]
                target = self._follow(path, "xi:include", href, line, mode, first_time, owners)
                if target and not nested and rec.root == "AssetDeclaration":
                    # XInclude at the document root splices the target's root element in as an asset;
                    # `xpointer(/n:X/child::*)` splices X's children instead (research/sage.md §1.4).
                    self.splices.setdefault(target, "children" if "child::" in xpointer else "root")
        finally:
            self._chain.pop()

    def _follow(
        self,
        path: str,
        kind: str,
        source: str,
        line: int,
        child_mode: str,
        first_time: bool,
        owners: list[tuple[str, int, int]] | None = None,
    ) -> str | None:
        target = self.b.resolver.resolve_checked(source, path)
        outside = target == OUTSIDE
        if outside:
            target = None
        if target and owners:
            known = self.fragment_owners.setdefault(target, [])
            known.extend(o for o in owners if o not in known)
        manifest = ""
        if target and kind == "reference":
            manifest = self.b.manifest_for(target, source) or ""
        if first_time:
            self.edges.append((path, kind, source, line, target, manifest))
            if outside:
                # Named as written, never as resolved: the message must not say where a link points.
                self.diag(
                    path,
                    line,
                    "include-outside-roots",
                    "error",
                    f"{kind} include {source!r} is an absolute Windows path (a drive or share of the machine "
                    "it was written on); here it leads outside the mod and SDK folders and was not read: "
                    "write it as DATA:… or relative to this file"
                    if _WINDOWS_ABSOLUTE.match(source)
                    else f"{kind} include {source!r} leads outside the mod and SDK folders; it was not read",
                )
            elif target is None and self.b.sdk is None and _has_alias(source):
                self.suppressed += 1  # one `sdk-not-configured` says it all (research/sage.md §1.4)
            elif target is None:
                folder = self.b.resolver.resolve_folder(source, path)
                self.diag(
                    path,
                    line,
                    "include-not-found",
                    "warning",
                    f"{kind} include {source!r} names a folder ({self.b.display(folder)}), not a file: an "
                    "include reads one XML file; name a file in that folder"
                    if folder is not None
                    else f"{kind} include {source!r} does not resolve to a file",
                )
        if target is None:
            return None
        if manifest and self._load_manifest(manifest, target):
            streams = self.membership.setdefault(target, {})
            streams.setdefault(self._stream, "reference")
            return target
        if target in self._chain or len(self._chain) >= MAX_INCLUDE_DEPTH:
            if first_time:
                self.diag(
                    path,
                    line,
                    "include-cycle",
                    "error",
                    f"{kind} include {source!r} leads back to a file already being included",
                )
            return target
        self._visit(target, child_mode)
        return target

    def _load_manifest(self, manifest: str, target: str) -> bool:
        if manifest not in self.manifests_loaded:
            # Imported here: only a `reference` include with a compiled manifest reads one.
            from deskbridge.kinds.sage.manifest import ManifestError, parse_manifest

            try:
                data = self.b._read(manifest, MANIFEST_MAX_BYTES)
                if data is None:
                    raise ManifestError(self.b.read_errors.pop()[1])
                parsed = parse_manifest(data)
            except ManifestError as exc:
                self.diag(
                    manifest,
                    0,
                    "manifest-error",
                    "warning",
                    f"cannot read {manifest}: {exc}; walking {target} instead",
                )
                self.manifests_loaded[manifest] = None
                return False
            defs = [AssetDef(a.type, a.id, "", 0, "manifest", -1, manifest, a.source) for a in parsed.assets]
            self.manifests_loaded[manifest] = defs
            self.manifest_assets.extend(defs)
        return self.manifests_loaded[manifest] is not None


def _file_assets(rec: FileRecords, splice: str | None) -> list[tuple[int, tuple[str, str, int]]]:
    """(index, (type, id, line)) of the assets a file defines: its top-level assets, or for a fragment
    spliced in by a root-level `xi:include`, its root element or its children."""
    if rec.root == "AssetDeclaration" or splice is None:
        return list(enumerate(rec.assets))
    if splice == "root":
        return [(SPLICED_ROOT, rec.spliceable[0])] if rec.root_has_id else []
    first = 1 if rec.root_has_id else 0
    return [(i, rec.spliceable[i]) for i in range(first, len(rec.spliceable))]


_WINDOWS_ABSOLUTE = re.compile(r"\s*(?:[A-Za-z]:[\\/]|\\\\[^\\/])")
"""`C:\\…`, `C:/…` or a UNC share `\\\\server\\…`: a path of the author's machine (single-letter drives are
never one of the DATA:/ART:/AUDIO:/ROOT: aliases)."""


def _has_alias(source: str) -> bool:
    alias, sep, _ = source.partition(":")
    return bool(sep) and alias.strip().casefold() in ("data", "art", "audio", "root")


def _asset_at(rec: FileRecords, line: int) -> int:
    """Index of the asset whose definition contains `line` (the last one starting at or before it)."""
    best = -1
    for i, (_t, _id, start) in enumerate(rec.assets):
        if start <= line:
            best = i
        else:
            break
    return best


def _assemble(index: SageIndex, walk: _Walk) -> None:
    index.files = walk.files
    index.membership = walk.membership
    index.fragment_owners = walk.fragment_owners
    index.splices = walk.splices
    splices = walk.splices
    # Counted here from the records; the definitions themselves are made on first use (`_tables`).
    asset_count = len(walk.manifest_assets)
    define_count = ref_count = 0
    for path, rec in walk.files.items():
        splice = splices.get(path)
        asset_count += rec.asset_count if splice is None else len(_file_assets(rec, splice))
        define_count += len(rec.defines)
        ref_count += rec.ref_count
    index.stats.update(assetCount=asset_count, referenceCount=ref_count, defineCount=define_count)
    files, manifest_assets, diags, edges = walk.files, walk.manifest_assets, walk.diagnostics, walk.edges
    index.defer_tables(lambda: _tables(index, files, splices, manifest_assets, diags, edges))


def _tables(
    index: SageIndex,
    files: dict[str, FileRecords],
    splices: dict[str, str],
    manifest_assets: list[AssetDef],
    walk_diags: list[tuple[str, int, str, str, str]],
    edges: list[tuple[str, str, str, int, str | None, str]],
) -> tuple[Any, Any, Any, Any, Any]:
    """`assets`, `by_id`, `defines`, `diagnostics` and `includes` of a walked index, in walk order."""
    was_enabled = gc.isenabled()
    gc.disable()  # ~40 k long-lived containers: see `indexer._no_cyclic_gc`
    try:
        out = _make_tables(index, files, splices, manifest_assets, walk_diags)
        includes = [IncludeEdge(*e) for e in edges]
    finally:
        if was_enabled:
            gc.enable()
            # Built after the build froze the rest of the index (`ProjectIndexer.build_sync`): freeze
            # these too, once per index, so later full collections do not walk them.
            gc.freeze()
    return (*out, includes)


def _make_tables(
    index: SageIndex,
    files: dict[str, FileRecords],
    splices: dict[str, str],
    manifest_assets: list[AssetDef],
    walk_diags: list[tuple[str, int, str, str, str]],
) -> tuple[Any, Any, Any, Any]:
    diags = [Diagnostic(*d) for d in walk_diags]
    assets: dict[str, dict[str, list[AssetDef]]] = {}
    by_id: dict[str, list[AssetDef]] = {}
    defines: dict[str, list[DefineDef]] = {}
    project_prefix = str(index.project) + os.sep
    # The hot loop (~17 k assets): get-then-insert instead of `setdefault({} / [])`, which allocated a
    # throw-away dict and list per asset; insertion order, and so every answer, is unchanged.
    for path, rec in files.items():
        origin = "project" if path.startswith(project_prefix) else "sdk"
        if rec.diagnostics:
            diags.extend(
                Diagnostic(path, line, code, sev, message) for code, sev, line, message in rec.diagnostics
            )
        splice = splices.get(path)
        listed: Iterable[tuple[int, tuple[str, str, int]]] = (
            enumerate(rec.assets) if splice is None else _file_assets(rec, splice)
        )
        for i, (atype, aid, line) in listed:
            d = AssetDef(atype, aid, path, line, origin, i)
            key = aid.casefold()
            of_type = assets.get(atype)
            if of_type is None:
                of_type = assets[atype] = {}
            same = of_type.get(key)
            if same is None:
                of_type[key] = [d]
            else:
                same.append(d)
            same = by_id.get(key)
            if same is None:
                by_id[key] = [d]
            else:
                same.append(d)
        for name, value, line, override in rec.defines:
            dd = DefineDef(name, value, path, line, override)
            key = name.casefold()
            same = defines.get(key)
            if same is None:
                defines[key] = [dd]
            else:
                same.append(dd)
    diags.extend(_duplicate_defines(defines, index.display))
    for d in manifest_assets:
        key = d.id.casefold()
        assets.setdefault(d.type, {}).setdefault(key, []).append(d)
        by_id.setdefault(key, []).append(d)
    return assets, by_id, defines, diags


def _same_links(a: FileRecords, b: FileRecords) -> bool:
    """True when two versions of a file include the same things, so the walk would not change.

    Nested `xi:include`s are tied to the asset that holds them, so their owners must not move either."""
    if [(k, s) for k, s, _ in a.includes] != [(k, s) for k, s, _ in b.includes]:
        return False
    if [(h, x, n) for h, x, _, n in a.xincludes] != [(h, x, n) for h, x, _, n in b.xincludes]:
        return False
    return not any(n for *_, n in b.xincludes) or (
        [_asset_at(a, ln) for _, _, ln, n in a.xincludes if n]
        == [_asset_at(b, ln) for _, _, ln, n in b.xincludes if n]
    )


def patch_index(old: SageIndex, changed: dict[str, FileRecords], build_id: int) -> SageIndex | None:
    """A new index equal to a full rebuild after `changed` files were edited, or None when the edit
    changed the include graph (then only a full walk is correct).

    A save usually touches one file and leaves its includes alone, so the streams, memberships and
    include edges stay valid and only that file's definitions, defines, references and diagnostics move.
    Everything the old index shares is copied on write: the old index keeps answering unchanged.
    """
    for path, rec in changed.items():
        prev = old.files.get(path)
        if prev is None or path in old.splices or not _same_links(prev, rec):
            return None
    t0 = time.perf_counter()
    new = SageIndex(
        project=old.project,
        sdk=old.sdk,
        build_id=build_id,
        generated_at=_now_iso(),
        phase=old.phase,
        complete=old.complete,
        model_loader=old.model_loader,
        files={**old.files, **changed},
        membership=old.membership,
        streams=old.streams,
        includes=old.includes,
        fragment_owners=old.fragment_owners,
        splices=old.splices,
        source_candidates=old.source_candidates,
        inactive_files=old.inactive_files,
        inactive=old.inactive,
        deferred_art=old.deferred_art,
        scope=old.scope,
    )
    order = {p: i for i, p in enumerate(new.files)}
    prefix = str(old.project) + os.sep
    assets = dict(old.assets)
    by_id = dict(old.by_id)
    refs_to = dict(old.refs_built) if old.refs_built is not None else None
    defines = dict(old.defines)
    copied_types: set[str] = set()
    touched_ids: set[str] = set()
    touched_refs: set[str] = set()
    touched_defines: set[str] = set()
    for path, rec in changed.items():
        prev = old.files[path]
        touched_ids.update(a[1].casefold() for a in (*prev.assets, *rec.assets))
        # `raw_refs`: only the ids are read, so the previous version's rows need not be located.
        touched_refs.update(r[R_VALUE].casefold() for r in (*prev.raw_refs, *rec.raw_refs))
        touched_defines.update(d[0].casefold() for d in (*prev.defines, *rec.defines))
        for atype, _aid, _line in (*prev.assets, *rec.assets):
            if atype not in copied_types:
                assets[atype] = dict(assets.get(atype, {}))
                copied_types.add(atype)
    paths = set(changed)
    for key in touched_ids:
        by_id[key] = [d for d in by_id.get(key, ()) if d.file not in paths]
        for atype in copied_types:
            inner = assets[atype]
            if key in inner:
                inner[key] = [d for d in inner[key] if d.file not in paths]
    if refs_to is not None:
        for key in touched_refs:
            refs_to[key] = [s for s in refs_to.get(key, ()) if s[0] not in paths]
    for key in touched_defines:
        defines[key] = [d for d in defines.get(key, ()) if d.file not in paths]
    for path, rec in changed.items():
        origin = "project" if path.startswith(prefix) else "sdk"
        for i, (atype, aid, line) in enumerate(rec.assets):
            d = AssetDef(atype, aid, path, line, origin, i)
            key = aid.casefold()
            assets[atype].setdefault(key, []).append(d)
            by_id.setdefault(key, []).append(d)
        for name, value, line, override in rec.defines:
            defines.setdefault(name.casefold(), []).append(DefineDef(name, value, path, line, override))
        if refs_to is not None:
            for r in rec.refs:
                refs_to.setdefault(r[R_VALUE].casefold(), []).append((path, r))
    # Keep walk order, which the queries rely on for "which definition wins".
    manifest_last = len(order)
    for key in touched_ids:
        by_id[key].sort(key=lambda d: (order.get(d.file, manifest_last), d.line))
        for atype in copied_types:
            lst = assets[atype].get(key)
            if lst is not None:
                if lst:
                    lst.sort(key=lambda d: (order.get(d.file, manifest_last), d.line))
                else:
                    del assets[atype][key]
        if not by_id[key]:
            del by_id[key]
    for key in touched_refs if refs_to is not None else ():
        refs_to[key].sort(key=lambda s: (order[s[0]], s[1][3], s[1][4]))
        if not refs_to[key]:
            del refs_to[key]
    for key in touched_defines:
        defines[key].sort(key=lambda d: (order[d.file], d.line))
        if not defines[key]:
            del defines[key]
    new.assets, new.by_id, new.refs_built, new.defines = assets, by_id, refs_to, defines
    # The include graph is unchanged, but lines may have moved: carry the walk's edges and diagnostics of
    # the edited files over to their new lines (edges were recorded in the records' include order).
    line_maps: dict[str, dict[int, int]] = {}
    for path, rec in changed.items():
        new_lines = [ln for _k, _s, ln in rec.includes] + [ln for _h, _x, ln, _n in rec.xincludes]
        mine = [e for e in old.includes if e.file == path]
        line_maps[path] = {e.line: ln for e, ln in zip(mine, new_lines, strict=False)}
    if any(line_maps.values()):
        new.includes = [
            IncludeEdge(
                e.file, e.kind, e.source, line_maps[e.file].get(e.line, e.line), e.target, e.via_manifest
            )
            if e.file in line_maps
            else e
            for e in old.includes
        ]
    if any(line_maps.values()):
        new.fragment_owners = {
            frag: [(f, i, line_maps[f].get(ln, ln)) if f in line_maps else (f, i, ln) for f, i, ln in owners]
            for frag, owners in old.fragment_owners.items()
        }
    new.diagnostics = []
    for d in old.diagnostics:
        if d.code == "duplicate-define" or (d.file in paths and d.code in RECORD_CODES):
            continue  # recomputed below
        if d.file in line_maps and d.line in line_maps[d.file]:
            d = Diagnostic(d.file, line_maps[d.file][d.line], d.code, d.severity, d.message)
        new.diagnostics.append(d)
    for path, rec in changed.items():
        new.diagnostics.extend(
            Diagnostic(path, line, code, sev, msg) for code, sev, line, msg in rec.diagnostics
        )
    new.diagnostics.extend(_duplicate_defines(new.defines, new.display))
    new.stats = dict(old.stats)
    new.stats.update(
        assetCount=sum(len(v) for v in by_id.values()),
        referenceCount=sum(r.ref_count for r in new.files.values()),
        defineCount=sum(len(v) for v in defines.values()),
        parsedFiles=len(changed),
        recordsCacheHits=0,
        walkMs=0.0,
        patchedFiles=len(changed),
        elapsedMs=round((time.perf_counter() - t0) * 1000, 1),
    )
    return new


def _duplicate_defines(
    defines: dict[str, list[DefineDef]], display: Callable[[str], str]
) -> list[Diagnostic]:
    """BAB's rule (research/sage.md §2.7): a define name seen again from another document needs
    `override="true"`; names compare case-sensitively, as BAB's DefinitionSet does."""
    out: list[Diagnostic] = []
    for defs in defines.values():
        first: dict[str, DefineDef] = {}
        for dd in defs:
            f = first.get(dd.name)
            if f is None:
                first[dd.name] = dd
            elif f.file != dd.file and not dd.override:
                out.append(
                    Diagnostic(
                        dd.file,
                        dd.line,
                        "duplicate-define",
                        "error",
                        f"define {dd.name!r} is already defined in {display(f.file)}:"
                        f'{f.line}; add override="true" to replace it',
                    )
                )
    return out
