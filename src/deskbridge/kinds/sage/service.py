"""One opened SAGE project: background index builds, the last good index, the file watcher and snapshots.

States (seed §4.5): `no_index` → `building` → `ready_xml` (XML indexed, art pending) → `ready`; `stale` while
changes seen by the watcher are not indexed yet; `error` when a build failed (the last good index keeps
answering). Every answer carries `state, phase, complete, stale, buildId, generatedAt, projectDir`.
The public snapshot is written after 5 s without changes — never on every save — and once more, best
effort, on `stop()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.sage.indexer import ProgressCallback, ProjectIndexer
from deskbridge.kinds.sage.model import SageIndex

log = logging.getLogger(__name__)

SNAPSHOT_QUIET_S = 5.0
"""Seconds without changes before the public snapshot is written."""
WATCH_DEBOUNCE_MS = 300
"""watchfiles groups changes arriving within this many milliseconds into one re-index."""
WAIT_TIMEOUT_DEFAULT_S = 30.0
WAIT_TIMEOUT_MAX_S = 300.0
WATCHED_SUFFIXES = (".xml", ".w3x", ".manifest", ".xsd", ".babproj")
ROOT_POLL_S = 0.5
"""How often the watcher looks for a watched folder that went away, and waits after it came back."""
STOP_WAIT_S = 10.0
"""How long `stop()` waits for a running build before giving up on saving the cache."""


class SageService(ProjectIndexer):
    """Owns everything about one project; safe to query from the event loop while a build runs."""

    def __init__(
        self,
        project: Path | str,
        sdk: Path | str | None = None,
        *,
        search_paths: Iterable[Path] | None = None,
        use_cache: bool = True,
        snapshot_quiet_s: float = SNAPSHOT_QUIET_S,
    ) -> None:
        super().__init__(project, sdk, search_paths=search_paths, use_cache=use_cache)
        self.snapshot_quiet_s = snapshot_quiet_s
        self._build_lock = asyncio.Lock()
        self._final = asyncio.Event()
        self._watch_task: asyncio.Task[None] | None = None
        self._watch_stop: asyncio.Event | None = None
        self._build_task: asyncio.Task[None] | None = None
        self._snapshot_task: asyncio.Task[None] | None = None
        self._rebuild_task: asyncio.Task[SageIndex | None] | None = None
        self.watch_error: str | None = None

    # --- async lifecycle --------------------------------------------------------------------------
    async def start(self, watch: bool = True, progress: ProgressCallback | None = None) -> None:
        """Start the first build in the background, and the watcher."""
        self._build_task = asyncio.create_task(self._run_build(progress))
        if watch:
            self._watch_stop = asyncio.Event()
            self._watch_task = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        """Stop watching, then write the snapshot and the cache once more (best effort)."""
        if self._watch_stop is not None:
            self._watch_stop.set()
        for task in (self._watch_task, self._snapshot_task, self._rebuild_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._build_task is not None and not self._build_task.done():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._build_task), timeout=STOP_WAIT_S)
        try:
            if self.index is not None and self._snapshot_build != self.index.build_id:
                await asyncio.to_thread(self.write_snapshot_sync)
            if self.building():
                # The build thread cannot be stopped; saving now would write a cache half of this build
                # and half of the last one. The last saved cache stays; the next start re-parses.
                log.info("sage: a build is still running at stop; the records cache is not saved")
            else:
                await asyncio.to_thread(self.save_cache)
        except Exception:  # best effort on the way out
            log.exception("sage: final snapshot failed")

    async def rebuild(self, progress: ProgressCallback | None = None) -> SageIndex | None:
        await self._run_build(progress)
        return self.index

    async def _run_build(self, progress: ProgressCallback | None = None) -> None:
        loop = asyncio.get_running_loop()

        def report(done: int, total: int, message: str) -> None:
            self.progress_info = {"done": done, "total": total, "message": message}
            if progress:
                progress(done, total, message)

        def publish(index: SageIndex) -> None:
            loop.call_soon_threadsafe(self._published, index)

        async with self._build_lock:
            self._final.clear()
            self.state = "building"
            try:
                index = await asyncio.to_thread(self.build_sync, report, publish)
                await asyncio.to_thread(self._warm_up, index)
                await asyncio.to_thread(self.save_cache)
            except Exception as exc:
                log.exception("sage: build failed")
                self.error = f"{type(exc).__name__}: {exc}"
                self.state = "error"
                self._final.set()
                return
            await asyncio.sleep(0)  # let the last `_published` callback run
            self._schedule_snapshot()

    def _published(self, index: SageIndex) -> None:
        self.index = index
        self.error = None
        if self._pending:
            self.state = "stale"
        else:
            self.state = "ready" if index.complete else "ready_xml"
        if index.complete and not self._pending:
            self._final.set()

    async def changed(self, paths: Iterable[str]) -> SageIndex | None:
        """Apply a batch of changed paths (called by the watcher; callable directly in tests)."""
        batch = {
            os.path.abspath(p)
            for p in paths
            if p.casefold().endswith(WATCHED_SUFFIXES) or self.folder_event(p)
        }
        if not batch:
            return self.index
        self._pending |= batch
        self._final.clear()
        if self.index is not None:
            self.state = "stale"
        async with self._build_lock:
            todo, self._pending = self._pending, set()
            if not todo:
                return self.index
            try:
                index = await asyncio.to_thread(self.reindex_sync, todo)
            except Exception as exc:
                log.exception("sage: re-index failed")
                self.error = f"{type(exc).__name__}: {exc}"
                self.state = "error"
                self._final.set()
                return self.index
            self._published(index)
            await asyncio.to_thread(self._warm_up, index)
        self._schedule_snapshot()
        return self.index

    def status(self) -> dict[str, Any]:
        out = super().status()
        out["watching"] = self._watch_task is not None and not self._watch_task.done()
        if self.watch_error:
            out["watchError"] = self.watch_error
        return out

    @staticmethod
    def _warm_up(index: SageIndex) -> None:
        """Build the lazily computed parts (reverse references, unresolved references) off the query path."""
        index.unresolved()

    async def _watch(self) -> None:
        from watchfiles import awatch  # imported here: the CLI's one-shot commands never watch

        roots = [str(self.project)] + ([str(self.sdk)] if self.sdk else [])
        stop = self._watch_stop
        assert stop is not None
        watched: list[tuple[int, int] | None] | None = None
        try:
            while not stop.is_set():
                if not await _folders_present(roots, stop):
                    return
                now = _folder_ids(roots)
                came_back = watched is not None and now != watched
                watched = now
                seen = awatch(*roots, stop_event=stop, debounce=WATCH_DEBOUNCE_MS, recursive=True)
                if came_back:
                    # A folder that came back (or another in its place) may hold anything: index it in full. The
                    # task first runs once the new watch exists, so a file written during the build is reported.
                    self._rebuild_task = asyncio.create_task(self.rebuild())
                async for changes in seen:
                    await self.changed(path for _change, path in changes)
                    if _folder_ids(roots) != watched:
                        # The folder itself went (deleted, renamed, replaced by a restore or a checkout): the
                        # kernel keeps watching the old inode, which then reports the moved folder's files under
                        # the old name, or nothing at all. Watch the path anew.
                        break
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # e.g. the inotify watch limit: keep answering, say live updates stopped
            log.exception("sage: watcher stopped")
            self.watch_error = f"{type(exc).__name__}: {exc}"

    def _schedule_snapshot(self) -> None:
        if self._snapshot_task is not None:
            self._snapshot_task.cancel()
        self._snapshot_task = asyncio.create_task(self._snapshot_after_quiet())

    async def _snapshot_after_quiet(self) -> None:
        await asyncio.sleep(self.snapshot_quiet_s)
        if self.index is None or not self.index.complete or self._pending:
            return
        try:
            await asyncio.to_thread(self.write_snapshot_sync)
            await asyncio.to_thread(self.save_cache)
        except Exception:
            log.exception("sage: snapshot failed")

    # --- answering --------------------------------------------------------------------------------
    async def usable_index(
        self, wait_for_index: bool = False, timeout_s: float | None = None, allow_stale: bool = True
    ) -> SageIndex:
        """The index a query should use under the caller's consistency options, or a `BridgeError`."""
        if wait_for_index:
            timeout = WAIT_TIMEOUT_DEFAULT_S if timeout_s is None else timeout_s
            if not 0 < timeout <= WAIT_TIMEOUT_MAX_S:
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"timeoutSeconds {timeout} is outside (0, {WAIT_TIMEOUT_MAX_S}]",
                    hint="Call {tool} again with timeoutSeconds of at most 300, or freshness final (30 s).",
                )
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            for _ in range(3):
                if not self._is_final():
                    try:
                        await asyncio.wait_for(self._wait_final(), max(deadline - loop.time(), 0.001))
                    except TimeoutError:
                        raise BridgeError(
                            ErrorCode.NOT_READY,
                            f"The index did not become final within {timeout:g} s (state {self.state}).",
                            hint="Call sage_get_status to watch progress, then call {tool} again.",
                            data=self.status(),
                        ) from None
                # A write the watcher has not reported yet (it waits 300 ms for more changes): compare the
                # files the index answers from with the disk, and re-index what differs before answering.
                moved = await asyncio.to_thread(self._changed_on_disk)
                folders = await asyncio.to_thread(self.resolver.tree.changed_directories, WATCHED_SUFFIXES)
                if folders:
                    # A file appeared, vanished or was renamed: includes may resolve differently.
                    await self.rebuild()
                elif moved:
                    await self.changed(moved)
                else:
                    break
        index = self.index
        if index is None:
            raise BridgeError(
                ErrorCode.NOT_READY,
                f"The project is not indexed yet (state {self.state}).",
                hint="Call sage_get_status until state is ready_xml or ready, or call {tool} with freshness final.",
                data=self.status(),
            )
        if not allow_stale and not self._is_final():
            raise BridgeError(
                ErrorCode.INDEX_STALE,
                f"The index is not final (state {self.state}, complete {index.complete}).",
                hint="Call {tool} again with freshness final to wait for the re-index, or newest to accept this index.",
                data=self.status(),
            )
        return index

    def _changed_on_disk(self) -> list[str]:
        index = self.index
        if index is None:
            return []
        return self.store.changed_on_disk(list(index.files))

    def _is_final(self) -> bool:
        return self.index is not None and self.index.complete and not self._pending and self.state == "ready"

    async def _wait_final(self) -> None:
        while not self._is_final():
            if self.state == "error" and self._build_lock.locked() is False and self.index is not None:
                return
            self._final.clear()
            if self._is_final():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._final.wait(), 0.5)


def _folder_ids(folders: list[str]) -> list[tuple[int, int] | None]:
    """Which folders these paths name now (device, inode), None for one that is gone."""
    ids: list[tuple[int, int] | None] = []
    for folder in folders:
        try:
            st = os.stat(folder)
        except OSError:
            ids.append(None)
            continue
        ids.append((st.st_dev, st.st_ino))
    return ids


async def _folders_present(folders: list[str], stop: asyncio.Event) -> bool:
    """Wait until every folder exists (at once when they do); False when `stop` is set first."""
    if all(os.path.isdir(f) for f in folders):
        return True
    while not all(os.path.isdir(f) for f in folders):
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), ROOT_POLL_S)
        if stop.is_set():
            return False
    await asyncio.sleep(ROOT_POLL_S)  # a copy or checkout that brings it back takes a moment to finish
    return True
