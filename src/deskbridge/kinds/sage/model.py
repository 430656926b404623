"""The in-memory SAGE index: definitions, defines, references, streams and diagnostics of one project."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from deskbridge.kinds.sage._record import Record
from deskbridge.kinds.sage.paths import match_case
from deskbridge.kinds.sage.records import FileRecords, Ref
from deskbridge.kinds.sage.schema import SchemaModel

TYPE_CHECKING = False  # `typing` and `core.errors` (which imports it) are not loaded by a warm start
if TYPE_CHECKING:
    from typing import Any

    from deskbridge.core.errors import BridgeError


def outside_error(given: str) -> BridgeError:
    from deskbridge.core.errors import BridgeError, ErrorCode

    return BridgeError(
        ErrorCode.ACCESS_DENIED,
        f"{given!r} is outside the mod and SDK folders this index covers",
        hint="Pass a path inside the mod (Data/…) or the SDK; sage_get_status lists both folders.",
    )


Owner = tuple[str, str, str | None, tuple[str, int] | None]
"""(type, id, fragment file or None, include site (file, line) or None) of an asset holding a reference."""


def display_path(project: Path, path: str) -> str:
    """How a path shows to the modder: below `project` as a `Data/…` relative path, else absolute."""
    if not path:
        return ""
    root = str(project)
    if path.startswith(root + os.sep):
        # Project files print as `Data/…` on every platform, as the snapshot schema promises.
        return path[len(root) + 1 :].replace(os.sep, "/")
    return path


def _asset_index_at(rec: FileRecords, line: int) -> int:
    """Index of the asset whose definition contains `line` (the last one starting at or before it)."""
    best = -1
    for i, (_t, _id, start) in enumerate(rec.assets):
        if start <= line:
            best = i
        else:
            break
    return best


SPLICED_ROOT = -2
"""`AssetDef.index` of an asset that is a whole fragment file spliced in by a root-level `xi:include`."""

TABLES = ("assets", "by_id", "defines", "diagnostics", "includes")
"""The tables a warm start leaves to first use (`SageIndex.defer_tables`)."""
_TABLES_LOCK = threading.RLock()

MODE_RANK = {"all": 0, "instance": 1, "reference": 2}
"""How a file belongs to a stream: `all` = compiled into it; `instance` = visible for inheritance and
references but not emitted; `reference` = part of another stream this one references (research/sage.md §2.2)."""


class AssetDef(Record):
    """One definition site of an asset; several per (type, id) are normal (overrides, copies)."""

    __slots__ = _fields = ("type", "id", "file", "line", "origin", "index", "manifest", "source")

    def __init__(
        self,
        type: str,
        id: str,
        file: str,
        line: int,
        origin: str,
        index: int = -1,
        manifest: str = "",
        source: str = "",
    ) -> None:
        self.type = type
        self.id = id
        self.file = file
        """Real path of the defining file ('' for manifest entries)."""
        self.line = line
        self.origin = origin
        """`project`, `sdk` or `manifest`."""
        self.index = index
        """Position among the file's assets (joins the file's reference records)."""
        self.manifest = manifest
        self.source = source
        """For manifest entries: the source file the manifest names."""


class DefineDef(Record):
    __slots__ = _fields = ("name", "value", "file", "line", "override")

    def __init__(self, name: str, value: str, file: str, line: int, override: bool) -> None:
        self.name = name
        self.value = value
        self.file = file
        self.line = line
        self.override = override


class IncludeEdge(Record):
    """One include as written, and where it led."""

    __slots__ = _fields = ("file", "kind", "source", "line", "target", "via_manifest")

    def __init__(
        self, file: str, kind: str, source: str, line: int, target: str | None, via_manifest: str = ""
    ) -> None:
        self.file = file
        self.kind = kind
        """`all`, `instance`, `reference` or `xi:include`."""
        self.source = source
        self.line = line
        self.target = target
        self.via_manifest = via_manifest


class Diagnostic(Record):
    __slots__ = _fields = ("file", "line", "code", "severity", "message")

    def __init__(self, file: str, line: int, code: str, severity: str, message: str) -> None:
        self.file = file
        self.line = line
        self.code = code
        self.severity = severity
        self.message = message


class SageIndex(Record):
    """Everything one build found; immutable once published (a new build makes a new object)."""

    _fields = (
        "project",
        "sdk",
        "build_id",
        "generated_at",
        "phase",
        "complete",
        "model_loader",
        "files",
        "membership",
        "streams",
        "includes",
        "assets",
        "by_id",
        "defines",
        "refs_built",
        "splices",
        "fragment_owners",
        "diagnostics",
        "source_candidates",
        "inactive_files",
        "inactive",
        "deferred_art",
        "stats",
        "degraded",
        "scope",
        "_chains",
        "_frag_owners",
        "_frags_of",
        "_unresolved",
        "_model",
    )

    def __init__(
        self,
        project: Path,
        sdk: Path | None,
        build_id: int,
        generated_at: str,
        phase: str = "xml",
        complete: bool = False,
        model_loader: Callable[[], SchemaModel | None] | None = None,
        files: dict[str, FileRecords] | None = None,
        membership: dict[str, dict[str, str]] | None = None,
        streams: dict[str, str] | None = None,
        includes: list[IncludeEdge] | None = None,
        assets: dict[str, dict[str, list[AssetDef]]] | None = None,
        by_id: dict[str, list[AssetDef]] | None = None,
        defines: dict[str, list[DefineDef]] | None = None,
        refs_built: dict[str, list[tuple[str, Ref]]] | None = None,
        splices: dict[str, str] | None = None,
        fragment_owners: dict[str, list[tuple[str, int, int]]] | None = None,
        diagnostics: list[Diagnostic] | None = None,
        source_candidates: list[str] | None = None,
        inactive_files: dict[str, FileRecords] | None = None,
        inactive: dict[str, list[AssetDef]] | None = None,
        deferred_art: list[str] | None = None,
        stats: dict[str, Any] | None = None,
        degraded: list[str] | None = None,
        scope: Any = None,
        _chains: dict[str, frozenset[str]] | None = None,
        _frag_owners: dict[str, list[Owner]] | None = None,
        _frags_of: dict[tuple[str, int], list[tuple[str, tuple[str, int]]]] | None = None,
        _unresolved: list[Diagnostic] | None = None,
        _model: SchemaModel | None = None,
    ) -> None:
        self.project = project
        self.sdk = sdk
        self.build_id = build_id
        self.generated_at = generated_at
        self.phase = phase
        """`xml` (art not scanned yet) or `art` (final)."""
        self.complete = complete
        self.model_loader = model_loader
        """Gives the compiled XSD model on first need: a warm start answering `find_asset` never loads it."""
        self.files: dict[str, FileRecords] = {} if files is None else files
        self.membership: dict[str, dict[str, str]] = {} if membership is None else membership
        """File → {stream → how it belongs}."""
        self.streams: dict[str, str] = {} if streams is None else streams
        """Stream name → entry file."""
        self.includes: list[IncludeEdge] = [] if includes is None else includes
        self.assets: dict[str, dict[str, list[AssetDef]]] = {} if assets is None else assets
        """Type (exact) → id (case-folded) → definitions in walk order."""
        self.by_id: dict[str, list[AssetDef]] = {} if by_id is None else by_id
        self.defines: dict[str, list[DefineDef]] = {} if defines is None else defines
        """Define name (case-folded) → definitions in walk order."""
        self.refs_built = refs_built
        """The reverse reference map once built (see `refs_to`)."""
        self.splices: dict[str, str] = {} if splices is None else splices
        """Fragment file → `root` or `children`: spliced in as top-level assets by a root-level
        `xi:include`."""
        self.fragment_owners: dict[str, list[tuple[str, int, int]]] = (
            {} if fragment_owners is None else fragment_owners
        )
        """Fragment file → (including file, asset index, line of the `xi:include`) of each nested
        `xi:include` that pulls it in; the index is -1 when the includer is itself a fragment (its owners
        own this one)."""
        self.diagnostics: list[Diagnostic] = [] if diagnostics is None else diagnostics
        self.source_candidates: list[str] = [] if source_candidates is None else source_candidates
        self.inactive_files: dict[str, FileRecords] = {} if inactive_files is None else inactive_files
        """Records of the project's XML files that no stream reaches (a local overlay being edited,
        leftovers)."""
        self.inactive: dict[str, list[AssetDef]] = {} if inactive is None else inactive
        """Id (case-folded) → definitions in those files, `origin: inactive`. Kept apart from
        `assets`/`by_id`: they are found by `find_asset` with a warning but never count as live definitions
        or references."""
        self.deferred_art: list[str] = [] if deferred_art is None else deferred_art
        self.stats: dict[str, Any] = {} if stats is None else stats
        self.degraded: list[str] = [] if degraded is None else degraded
        """Why this index is not to be trusted as complete (files kept at their last good version, a build
        that lost over half the assets); the status then says `degraded` instead of `ready`."""
        self.scope = scope
        """The `paths.Scope` the index was built in: queries refuse paths outside it (issue 8)."""
        self._chains: dict[str, frozenset[str]] = {} if _chains is None else _chains
        self._frag_owners: dict[str, list[Owner]] = {} if _frag_owners is None else _frag_owners
        self._frags_of = _frags_of
        self._unresolved = _unresolved
        self._model = _model

    def defer_tables(self, build: Callable[[], tuple[Any, Any, Any, Any, Any]]) -> None:
        """Make `assets`, `by_id`, `defines`, `diagnostics` and `includes` on first use, from `build()`.

        They are ~17 k `AssetDef`s, ~2 k `DefineDef`s, 5.5 k `IncludeEdge`s and 3.3 k `Diagnostic`s on
        RA3Afterdash, about a third of a warm start's CPU; a process that opens the index to report its status or save its cache never reads them.
        The first reader builds all five (under a lock: the service warms an index up in a thread while
        the event loop may query it), and from then on they are plain attributes."""
        for name in TABLES:
            self.__dict__.pop(name, None)
        self._tables_fn = build

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: a deferred table not built yet.
        if name in TABLES and self.__dict__.get("_tables_fn") is not None:
            with _TABLES_LOCK:
                build = self.__dict__.get("_tables_fn")
                if build is not None:
                    self.assets, self.by_id, self.defines, self.diagnostics, self.includes = build()
                    self._tables_fn = None
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def unresolved(self) -> list[Diagnostic]:
        """`unresolved-reference` diagnostics, computed on first use (60 k sites cost ~80 ms) and kept.

        While the art phase is pending they are tagged `unresolved-reference-indexing`: the target may
        be an art asset not scanned yet."""
        if self._unresolved is None:
            code = "unresolved-reference" if self.complete else "unresolved-reference-indexing"
            out: list[Diagnostic] = []
            for key, sites in self.refs_to.items():
                defs = self.by_id.get(key)
                types = {d.type for d in defs} if defs else set()
                for path, r in sites:
                    if not any(self.assignable(t, r[1]) for t in types):
                        out.append(
                            Diagnostic(
                                path,
                                r[3],
                                code,
                                "warning",
                                f"{r[1]} {r[2]!r} is not defined in any indexed file",
                            )
                        )
            self._unresolved = out
        return self._unresolved

    def unresolved_count(self) -> tuple[str, int]:
        """(code, how many) of the `unresolved-reference` diagnostics without making them: counted from the
        reference rows' ids and types alone, so a cold build's rows need not be located for it (`deskbridge
        index` prints only counts). The same sites `unresolved` lists, by the same rule."""
        code = "unresolved-reference" if self.complete else "unresolved-reference-indexing"
        if self._unresolved is not None:
            return code, len(self._unresolved)
        if self.refs_built is not None:
            sites = ((key, [r for _p, r in rows]) for key, rows in self.refs_built.items())
        else:
            grouped: dict[str, list[Any]] = {}
            for rec in self.files.values():
                for r in rec.raw_refs:
                    grouped.setdefault(r[2].casefold(), []).append(r)
            sites = iter(grouped.items())
        n = 0
        for key, rows in sites:
            defs = self.by_id.get(key)
            types = {d.type for d in defs} if defs else set()
            for r in rows:
                if not any(self.assignable(t, r[1]) for t in types):
                    n += 1
        return code, n

    def all_diagnostics(self) -> list[Diagnostic]:
        return self.diagnostics + self.unresolved()

    @property
    def model(self) -> SchemaModel | None:
        if self._model is None and self.model_loader is not None:
            self._model = self.model_loader()
        return self._model

    @property
    def refs_to(self) -> dict[str, list[tuple[str, Ref]]]:
        """Target id (case-folded) → (file, reference record) of every reference site, in walk order.

        Built on first use: 60 k sites cost ~40 ms, which a one-shot `find-asset` should not pay. The
        service builds it right after publishing an index, off the query path."""
        built = self.refs_built
        if built is None:
            built = {}
            for path, rec in self.files.items():
                for r in rec.refs:
                    key = r[2].casefold()
                    lst = built.get(key)
                    if lst is None:
                        built[key] = [(path, r)]
                    else:
                        lst.append((path, r))
            self.refs_built = built
        return built

    # --- helpers shared by queries ----------------------------------------------------------------
    def display(self, path: str) -> str:
        """Project files as `Data/…` relative paths, everything else as an absolute path."""
        return display_path(self.project, path)

    def real_path(self, shown: str) -> str:
        """Inverse of `display` (accepts relative-to-project and absolute paths, backslashes and any letter
        case), normalised."""
        p = Path(shown.replace("\\", "/"))
        return match_case(os.path.normpath(str(p if p.is_absolute() else self.project / p)))

    def check_scope(self, real: str, given: str) -> None:
        """Refuse a path outside the mod and SDK folders, with one error whether or not it exists, naming
        the path as the caller gave it (never where it resolves to)."""
        if self.scope is not None and not self.scope.contains(real):
            raise outside_error(given)

    def origin_of(self, path: str) -> str:
        return "project" if path.startswith(str(self.project) + os.sep) else "sdk"

    def type_chain(self, asset_type: str) -> frozenset[str]:
        chain = self._chains.get(asset_type)
        if chain is None:
            chain = frozenset(self.model.chain(asset_type) if self.model else [asset_type])
            self._chains[asset_type] = chain
        return chain

    def assignable(self, asset_type: str, ref_type: str) -> bool:
        return asset_type == ref_type or ref_type in self.type_chain(asset_type)

    def resolve(self, ref_type: str, ident: str) -> list[AssetDef]:
        """Definitions a reference (`ref_type`, `ident`) can point at."""
        return [d for d in self.by_id.get(ident.casefold(), ()) if self.assignable(d.type, ref_type)]

    def refs_of(self, asset: AssetDef) -> list[Ref]:
        """Reference records written inside one definition (fragments it `xi:include`s: `fragment_refs_of`)."""
        rec = self.files.get(asset.file)
        if rec is None:
            return []
        if asset.index == SPLICED_ROOT:
            return list(rec.refs)  # the whole file is this one asset
        return [r for r in rec.refs if r[0] == asset.index]

    def owner(self, path: str, r: Ref) -> tuple[str, str, str | None] | None:
        """(type, id, fragment file or None) of the first asset a reference is written in."""
        owners = self.owners(path, r)
        return (owners[0][0], owners[0][1], owners[0][2]) if owners else None

    def owners(self, path: str, r: Ref) -> list[Owner]:
        """Every asset a reference is written in: one for a reference inside an asset, one per including
        asset for a fragment pulled in by nested `xi:include`s (a module shared by eight structures belongs
        to all eight), each with the include site `(file, line)` that pulled it in."""
        rec = self.files.get(path)
        if rec is None:
            return []
        if rec.root == "AssetDeclaration":
            if 0 <= r[0] < len(rec.assets):
                t, i, _ = rec.assets[r[0]]
                return [(t, i, None, None)]
            return []
        splice = self.splices.get(path)
        if splice == "root" and rec.spliceable:
            return [(rec.spliceable[0][0], rec.spliceable[0][1], None, None)]
        if splice == "children" and 0 <= r[0] < len(rec.spliceable):
            return [(rec.spliceable[r[0]][0], rec.spliceable[r[0]][1], None, None)]
        return self.fragment_owner_assets(path)

    def fragment_owner_assets(self, frag: str, _seen: frozenset[str] = frozenset()) -> list[Owner]:
        """(type, id, fragment, include site) of every asset that pulls `frag` in, through fragments that
        include fragments too; the include site is the `xi:include` in the asset's own file."""
        hit = self._frag_owners.get(frag)
        if hit is not None:
            return hit
        out: list[Owner] = []
        for opath, oi, line in self.fragment_owners.get(frag, ()):
            orec = self.files.get(opath)
            if orec is None:
                continue
            if orec.root == "AssetDeclaration":
                if 0 <= oi < len(orec.assets):
                    t, i, _ = orec.assets[oi]
                    out.append((t, i, frag, (opath, line)))
            elif opath not in _seen and opath != frag:
                out.extend(
                    (t, i, frag, site) for t, i, _f, site in self.fragment_owner_assets(opath, _seen | {frag})
                )
        seen: set[tuple[str, str, Any]] = set()
        unique = []
        for o in out:
            key = (o[0], o[1].casefold(), o[3])
            if key not in seen:
                seen.add(key)
                unique.append(o)
        if not _seen:
            self._frag_owners[frag] = unique
        return unique

    def fragment_refs_of(self, asset: AssetDef) -> list[tuple[str, Ref, tuple[str, int]]]:
        """(fragment, reference, include site) of every reference in the fragments an asset pulls in."""
        if self._frags_of is None:
            by_asset: dict[tuple[str, int], list[tuple[str, tuple[str, int]]]] = {}
            for frag in self.fragment_owners:
                for _t, _i, _f, site in self.fragment_owner_assets(frag):
                    rec = self.files.get(site[0]) if site else None
                    if rec is None or site is None:
                        continue
                    idx = _asset_index_at(rec, site[1])
                    by_asset.setdefault((site[0], idx), []).append((frag, site))
            self._frags_of = by_asset
        out: list[tuple[str, Ref, tuple[str, int]]] = []
        for frag, site in self._frags_of.get((asset.file, asset.index), ()):
            rec = self.files.get(frag)
            if rec is not None:
                out.extend((frag, r, site) for r in rec.refs)
        return out

    def streams_of(self, path: str) -> dict[str, str]:
        return self.membership.get(path, {})
