"""The synchronous core of one opened SAGE project: build, incremental re-index, cache and snapshot.

The CLI uses it directly (no event loop, no asyncio import on the one-shot path); `SageService` adds the
background builds, the watcher and the consistency options on top.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from deskbridge.core.folders import private_dir
from deskbridge.kinds.sage._trace import mark
from deskbridge.kinds.sage.build import IndexBuilder, patch_index
from deskbridge.kinds.sage.model import SageIndex
from deskbridge.kinds.sage.paths import PathResolver, Scope, default_search_paths
from deskbridge.kinds.sage.project import find_project_root, locate_sdk, schema_entry
from deskbridge.kinds.sage.schema import SchemaModel, load_schema, schema_digest, schema_fingerprint
from deskbridge.kinds.sage.settings import deskbridge_dirs, read_sage_config
from deskbridge.kinds.sage.snapshot import project_key, write_snapshot
from deskbridge.kinds.sage.store import RecordStore

TYPE_CHECKING = False  # `typing` is not loaded by a warm start
if TYPE_CHECKING:
    from typing import Any

ProgressCallback = Callable[[int, int, str], None]


@contextlib.contextmanager
def _no_cyclic_gc() -> Any:
    """Pause the cyclic garbage collector while a build allocates ~10^6 long-lived lists and tuples.

    Each allocation burst would otherwise trigger full collections that walk the whole (acyclic) index:
    measured ~40 % of a warm start. Reference counting still frees everything meanwhile."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class ProjectIndexer:
    """Owns the index of one project: builds, incremental re-index, cache and snapshot, all synchronous."""

    def __init__(
        self,
        project: Path | str,
        sdk: Path | str | None = None,
        *,
        search_paths: Iterable[Path] | None = None,
        use_cache: bool = True,
    ) -> None:
        self.project = find_project_root(Path(project))
        self.sdk = locate_sdk(sdk)
        extra = list(search_paths) if search_paths is not None else list(read_sage_config().search_paths)
        self.search = default_search_paths(self.project, self.sdk, extra)
        roots = [self.project, *([self.sdk] if self.sdk else []), *extra]
        self.scope = Scope(roots)
        """What the index may read: the mod, the SDK and the configured search paths (issue 8)."""
        self.resolver = PathResolver(self.search, scope=self.scope)
        dirs = deskbridge_dirs()
        # Owner-only, as pvf's history and index are: the records cache and the snapshots describe a person's mod
        # (every file, asset and reference); another local user reads nothing of it whatever the umask.
        self.cache_dir = private_dir(dirs.cache / "sage") if use_cache else None
        self.data_dir = dirs.data
        self._entry = schema_entry(self.sdk) if self.sdk else None
        self._model: SchemaModel | None = None
        self._model_lock = threading.Lock()
        self._building = threading.RLock()
        """Held by the thread running a build or a re-index. The cache is saved only while nobody holds it:
        a save during a build would write the resolver's and the store's dicts half-way through (and
        iterating them while the build adds entries raised "dictionary changed size during iteration")."""
        entry = self._entry
        digest = (lambda: schema_digest(entry)) if entry else (lambda: "no-sdk")
        stat = schema_fingerprint(entry) if entry else "no-sdk"
        cache_file = (
            (self.cache_dir / project_key(self.project) / "records.marshal") if self.cache_dir else None
        )
        self.store = RecordStore(self.model, cache_file, digest, stat, scope=self.scope, shown=self._shown)
        self.builder = IndexBuilder(
            self.project,
            self.sdk,
            self.resolver,
            self.store,
            self.model,
            self._adopt_model,
            lambda: self._model,
        )
        self.index: SageIndex | None = None
        self.state = "no_index"
        self.error: str | None = None
        self.progress_info: dict[str, Any] = {"done": 0, "total": 0, "message": ""}
        self._build_id = 0
        self._pending: set[str] = set()
        self._snapshot_build = -1
        self.last_snapshot: Path | None = None
        self._cache_loaded = False
        self._baseline: dict[str, int] = {}
        """Asset count of the last index per phase that lost nothing: a build that loses more than half of
        it is published as degraded (issue 12)."""

    def _shown(self, path: str) -> str:
        """How messages name a file: relative to the project when inside it, else as it is."""
        root = str(self.project) + os.sep
        return path[len(root) :].replace(os.sep, "/") if path.startswith(root) else path

    # --- schema -----------------------------------------------------------------------------------
    def model(self) -> SchemaModel | None:
        """The compiled XSD model, loaded on first need (a warm start from cache never needs it)."""
        if self._entry is None:
            return None
        with self._model_lock:
            if self._model is None:
                # The digest as a callable: a cold build's schema process hashes the XSDs after it sent
                # the model (`schema.EARLY_MODEL`).
                self._model = load_schema(self._entry, self.cache_dir, lambda: self.store.model_digest)
                self._note_schema(self._model)
            return self._model

    def _note_schema(self, model: SchemaModel | None) -> None:
        """Keep the schema's problems with the records (a warm start never loads the model, yet its
        diagnostics must say them: the records were typed by that incomplete model)."""
        problems = [list(p) for p in model.problems] if model is not None else []
        if self.store.extras.get("schemaProblems", []) != problems:
            self.store.extras["schemaProblems"] = problems
            self.store.dirty = True

    def _adopt_model(self, model: SchemaModel | None) -> None:
        """The model a cold build compiled in another process (`parallel.prefetch`)."""
        with self._model_lock:
            if self._model is None:
                self._model = model
                self._note_schema(model)
        if model is not None and model.digest:
            # The schema process hashed the XSDs for this model's cache key: the records cache is keyed by
            # the same digest, so the parent need not read and hash the 815 files again when it saves.
            self.store.adopt_digest(model.digest)

    # --- building (synchronous core, used by the CLI and by the async wrappers) -------------------
    def build_sync(
        self, progress: ProgressCallback | None = None, publish: Callable[[SageIndex], None] | None = None
    ) -> SageIndex:
        """Full two-phase build: XML first (published as `ready_xml`), then art (`ready`)."""
        with self._building, _no_cyclic_gc():
            index = self._build(progress, publish)
            # The index is ~10^6 long-lived, acyclic containers. Without this every later full collection
            # (and the one at interpreter exit) walks all of them: measured 420 → 210 ms CPU for a warm
            # `deskbridge sage …` process, and no ~100 ms collector pauses between queries in a server.
            # Reference counting still frees a replaced index; only cyclic garbage that happens to exist
            # at this instant is kept for good, which is why this runs once per full build, not per save.
            gc.freeze()
        return index

    def _build(
        self, progress: ProgressCallback | None, publish: Callable[[SageIndex], None] | None
    ) -> SageIndex:
        progress = progress or (lambda done, total, message: None)
        self.store.distrust_all()
        self.resolver.invalidate()
        self.resolver.tree.clear()
        if not self._cache_loaded:
            self.store.load()
            self._cache_loaded = True
            if self.store.extras.get("resolver"):
                self.resolver.import_state(self.store.extras["resolver"])
        self._build_id += 1
        xml = self.builder.build(self._build_id, with_art=False, progress=progress)
        if xml.complete:
            xml.phase = "art"
            final = xml
        else:
            self._publish(xml, publish)
            progress(len(xml.files), len(xml.files) + len(xml.deferred_art), "scanning art files")
            self._build_id += 1
            final = self.builder.build(self._build_id, with_art=True, progress=progress)
            # One build in two phases: report what both parsed (the XML phase parses most files).
            for key in ("parsedFiles", "recordsCacheHits"):
                final.stats[key] = final.stats.get(key, 0) + xml.stats.get(key, 0)
        self._publish(final, publish)
        return final

    def _assess(self, index: SageIndex) -> SageIndex:
        """Flag an index that should not be trusted as complete, with the reasons."""
        reasons: list[str] = []
        kept = [p for p, r in index.files.items() if r.last_good]
        if kept:
            shown = ", ".join(index.display(p) for p in kept[:5]) + (" …" if len(kept) > 5 else "")
            reasons.append(
                f"{len(kept)} file(s) do not parse; the index keeps their last good version: {shown} "
                "(sage_list_diagnostics code parse-error)"
            )
        schema = len(self.store.extras.get("schemaProblems") or ())  # not index.diagnostics: made lazily
        if schema:
            reasons.append(
                f"{schema} problem(s) in the SDK's schemas: references they would type are missed "
                "(sage_list_diagnostics code schema-error)"
            )
        count = int(index.stats.get("assetCount", 0))
        base = self._baseline.get(index.phase)
        if not os.path.isdir(self.project):
            # The whole mod folder was moved, renamed or deleted while served: no save lost anything, and
            # the watcher, which followed the folder it was given, will not see it come back.
            reasons.append(
                f"the project folder {self.project} is gone (moved, renamed or deleted while deskbridge had "
                f"it open), so this build found none of its files ({count} assets): put the folder back and "
                "restart deskbridge serve, or serve the mod from where it is now (deskbridge serve <its new "
                "path>)"
            )
        elif base and count * 2 < base:
            reasons.append(
                f"this build has {count} assets, {base - count} fewer than the last good one ({base}): "
                "an include or a file was probably lost in the last save"
            )
        else:
            self._baseline[index.phase] = count
        index.degraded = reasons
        return index

    def _publish(self, index: SageIndex, publish: Callable[[SageIndex], None] | None) -> None:
        self._assess(index)
        self.index = index
        if publish:
            publish(index)
        else:
            self.state = "ready" if index.complete else "ready_xml"
        mark(f"published {index.phase}")

    def reindex_sync(self, paths: Iterable[str]) -> SageIndex:
        """Re-index after files changed: patch the index when only contents changed, else rebuild."""
        with self._building, _no_cyclic_gc():
            return self._reindex(paths)

    def _reindex(self, paths: Iterable[str]) -> SageIndex:
        paths = {os.path.abspath(p) for p in paths}
        old = self.index
        schema_dir = str(self._entry.parent) if self._entry else None
        if schema_dir and any(
            p.casefold().endswith(".xsd") and p.startswith(schema_dir + os.sep) for p in paths
        ):
            # The schemas changed: every record may type its references differently.
            with self._model_lock:
                self._model = None
            entry = self._entry
            assert entry is not None
            self.store = RecordStore(
                self.model,
                self.store.cache_file,
                lambda: schema_digest(entry),
                schema_fingerprint(entry),
                scope=self.scope,
                shown=self._shown,
            )
            self.builder.store = self.store
            self._cache_loaded = True
            return self.build_sync()
        if old is None or any(self.folder_event(p) for p in paths):
            return (
                self.build_sync()
            )  # a folder appeared, vanished or was renamed: includes may resolve differently
        overlay = {p for p in paths if p in old.inactive_files}
        relevant = {p for p in paths - overlay if not self._cannot_matter(old, p)}
        if overlay and not relevant:
            # Only files no stream includes changed: refresh their `origin: inactive` definitions.
            self.store.invalidate(overlay)
            self._build_id += 1
            new = old.replace(
                build_id=self._build_id,
                inactive_files=dict(old.inactive_files),
                refs_built=old.refs_built,
            )
            self.builder.index_inactive(new, sorted(overlay))
            self.index = new
            return new
        if not relevant:
            return old
        if any(p not in old.files or not os.path.exists(p) for p in relevant):
            return self.build_sync()  # files appeared or vanished: includes may resolve differently
        paths = relevant
        self.store.invalidate(paths)
        changed = {}
        for p in paths:
            rec = self.store.get(p)
            if rec is None:
                return self.build_sync()
            changed[p] = rec
        self._build_id += 1
        new = patch_index(old, changed, self._build_id)
        if new is None:
            self._build_id -= 1
            return self.build_sync()
        self.index = self._assess(new)
        return new

    def folder_event(self, path: str) -> bool:
        """Whether a changed path is a folder that includes may look in: one the last build listed (now
        renamed or gone), or a new one inside such a folder. A watcher reports a renamed folder by its two
        paths only, not the files under it; folders no include can reach (`.git/objects/…`) do not count."""
        path = os.path.abspath(path)
        tree = self.resolver.tree
        if tree.cached_listing(path) is not None:
            return True
        return tree.cached_listing(os.path.dirname(path)) is not None and os.path.isdir(path)

    def _cannot_matter(self, old: SageIndex, path: str) -> bool:
        """A file no stream reaches, which already existed at the last build, cannot change any answer."""
        if path in old.files or path.casefold().endswith((".babproj", ".manifest")):
            return False
        if not path.casefold().endswith((".xml", ".w3x")):
            return True
        folder, name = os.path.split(path)
        listing = self.resolver.tree.cached_listing(folder)  # as seen by the last build, not as now
        return bool(listing) and name in listing and os.path.exists(path)

    def save_cache(self) -> bool:
        """Write the records cache (and the resolver's answers) when anything changed.

        Not while a build or re-index runs in another thread (`SageService.stop` stops waiting for one
        after a while): the store and the resolver are then between two builds, and a saved cache must
        never mix them. Skipping loses nothing that was saved: the last cache stays, and the build
        that is running saves when it ends (`SageService._run_build`)."""
        if not self._building.acquire(blocking=False):
            return False
        try:
            # A warm start answers every include from the imported answers: nothing to export then.
            state = self.resolver.export_state() if self.resolver.changed else None
            if state is not None and state != self.store.extras.get("resolver"):
                self.store.extras["resolver"] = state
                self.store.dirty = True
            with _no_cyclic_gc():
                saved = self.store.save()
            mark("cache-saved")
            return saved
        finally:
            self._building.release()

    def building(self) -> bool:
        """True while another thread runs a build or a re-index."""
        if self._building.acquire(blocking=False):
            self._building.release()
            return False
        return True

    def write_snapshot_sync(self) -> Path | None:
        index = self.index
        if index is None:
            return None
        with _no_cyclic_gc():
            path = write_snapshot(index, stale=bool(self._pending), data_dir=self.data_dir)
        self._snapshot_build = index.build_id
        self.last_snapshot = path
        return path

    # --- answering --------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The envelope every answer carries, plus progress while building."""
        index = self.index
        out: dict[str, Any] = {
            "state": self.state,
            "phase": index.phase if index else None,
            "complete": bool(index and index.complete),
            "stale": bool(self._pending) or self.state == "stale",
            "buildId": index.build_id if index else None,
            "generatedAt": index.generated_at if index else None,
            "projectDir": str(self.project),
        }
        if index is not None and index.degraded:
            if out["state"] in ("ready", "ready_xml"):
                out["state"] = "degraded"
            out["degraded"] = list(index.degraded)
        if self.state == "building":
            out["progress"] = dict(self.progress_info)
        if self.error:
            out["error"] = self.error
        return out

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """Attach the index envelope to a query result."""
        body["index"] = self.status()
        return body

    def open_sync(self) -> SageIndex:
        """Build (from the cache when valid) without an event loop: the CLI's path."""
        t = time.perf_counter()
        index = self.build_sync()
        self.state = "ready" if index.complete else "ready_xml"
        index.stats["openMs"] = round((time.perf_counter() - t) * 1000, 1)
        return index
