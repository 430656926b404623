"""Endpoint files and workspace locks: how `deskbridge mcp --project PATH` finds the `serve` that has PATH open.

Every `serve` writes `<state dir>/endpoints/<slug>-<sha1-12>.json` for its workspace (url, the token's file, pid,
kind, projectDir, started) plus a global `last.json`, and removes only the files that still name its own pid when
it exits. A reader trusts an endpoint only when its pid is alive and a health check within 1.5 s names the same
projectDir (seed ra3-mod-xml §10: one global file let one window answer for another's project).

A workspace that can be written (pvf, markdown) is held by one process at a time through
`<state dir>/locks/<key>.lock`; a later `serve` asks an in-process bridge to let go through `<key>.takeover`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import platformdirs

from deskbridge.core.folders import private_dir

HEALTH_TIMEOUT_S: Final = 1.5
"""How long a health check may take before the server counts as not live (seconds)."""
TAKEOVER_WAIT_S: Final = 10.0
"""How long `serve` waits for an in-process bridge to release a workspace it asked for (seconds)."""
HEALTH_PATH: Final = "/mcp/health"
PROJECT_HEADER: Final = "x-deskbridge-project"
"""Response header on every /mcp reply: the served projectDir, percent-encoded (so a reader can re-check it)."""


def state_dir() -> Path:
    """platformdirs' user state directory, or `$DESKBRIDGE_HOME/state` (as settings.py does for the others)."""
    home = os.environ.get("DESKBRIDGE_HOME")
    if home:
        return Path(home).expanduser() / "state"
    return Path(platformdirs.user_state_dir("deskbridge", appauthor=False))


def private_state_dir(path: Path) -> Path:
    """Create `path` — the state folder or a folder in it — owner-only, and the state folder with it
    (`core.folders.private_dir`): the names in there tell which projects a person works on (an endpoint or lock
    file is named after its project, an unsaved document after itself) and the files hold secrets or text."""
    state = state_dir()
    private_dir(state)
    return state if path == state else private_dir(path)


def project_key(project: Path) -> str:
    """`<slug>-<sha1-12>`: readable, and unique per absolute path."""
    text = str(project)
    slug = re.sub(r"[^a-z0-9]+", "-", project.name.casefold()).strip("-")[:40] or "project"
    return f"{slug}-{hashlib.sha1(text.encode()).hexdigest()[:12]}"


def normalise(path: Path | str) -> Path:
    return Path(path).expanduser().resolve()


def covers(project_dir: Path | str, wanted: Path | str) -> bool:
    """True when a workspace opened at `project_dir` serves `wanted`: the same path, or a path inside it."""
    served, target = normalise(project_dir), normalise(wanted)
    return target == served or served in target.parents


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (a zombie or another user's process counts as alive)."""
    if pid <= 0:
        return False
    if sys.platform == "win32":  # pragma: no cover - os.kill(pid, 0) would terminate it on Windows
        import ctypes

        handle = ctypes.windll.kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not handle:
            return False
        ctypes.windll.kernel32.CloseHandle(handle)
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Owner-only, atomic (temp file + rename in the same folder)."""
    private_state_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, ensure_ascii=False)
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# -- endpoint files -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """What one running `serve` published about itself."""

    url: str
    """Base URL, e.g. http://127.0.0.1:17891 (MCP is at `url + /mcp`)."""
    token_file: str
    """Where the bearer token lives (a reference: the token itself is never written here)."""
    pid: int
    kind: str
    project_dir: str
    started: float
    version: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "mcp": self.url + "/mcp",
            "tokenFile": self.token_file,
            "pid": self.pid,
            "kind": self.kind,
            "projectDir": self.project_dir,
            "started": self.started,
            "version": self.version,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Endpoint | None:
        try:
            return cls(
                url=str(data["url"]),
                token_file=str(data["tokenFile"]),
                pid=int(data["pid"]),
                kind=str(data.get("kind", "")),
                project_dir=str(data["projectDir"]),
                started=float(data.get("started", 0)),
                version=str(data.get("version", "")),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def token(self) -> str | None:
        try:
            return Path(self.token_file).read_text("ascii").strip() or None
        except OSError:
            return None


def endpoints_dir() -> Path:
    return state_dir() / "endpoints"


def endpoint_path(project: Path | str) -> Path:
    return endpoints_dir() / f"{project_key(normalise(project))}.json"


class Publication:
    """The files one `serve` wrote; `remove()` deletes only those that still name this process."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.paths = [endpoint_path(endpoint.project_dir), endpoints_dir() / "last.json"]
        for path in self.paths:
            _write_json(path, endpoint.to_json())

    def remove(self) -> None:
        for path in self.paths:
            data = _read_json(path)
            if (
                data is not None
                and data.get("pid") == self.endpoint.pid
                and data.get("url") == self.endpoint.url
            ):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        self.paths = []


def candidate_endpoints(project: Path | str) -> list[Endpoint]:
    """Endpoints that claim to serve `project`: its own file first, then `last.json` when its projectDir matches,
    then any other endpoint whose workspace contains it. Liveness is not checked here."""
    wanted = normalise(project)
    out: list[Endpoint] = []
    seen: set[tuple[int, str]] = set()
    paths = [endpoint_path(wanted), endpoints_dir() / "last.json"]
    with contextlib.suppress(OSError):
        paths += sorted(p for p in endpoints_dir().glob("*.json") if p not in paths)
    for path in paths:
        data = _read_json(path)
        endpoint = Endpoint.from_json(data) if data else None
        if endpoint is None or not covers(endpoint.project_dir, wanted):
            continue
        if (endpoint.pid, endpoint.url) not in seen:
            seen.add((endpoint.pid, endpoint.url))
            out.append(endpoint)
    return out


def proves_token(endpoint: Endpoint, timeout: float = HEALTH_TIMEOUT_S) -> bool:
    """True when the server at `endpoint.url` answers a fresh random challenge with `web.security.health_proof`
    (HMAC with our token), i.e. it holds the token; the token itself is not sent.

    An endpoint file outlives a server that was killed (or the machine's restart), and its pid then names some
    other process, so "pid alive" proves nothing: whoever listens on that port now — another local user's program
    — would get the bearer token with the first request."""
    import hmac
    import secrets
    from urllib.parse import urlsplit

    import httpx2

    from deskbridge.web.security import HEALTH_CHALLENGE_HEADER, health_proof

    token = endpoint.token()
    if token is None:
        return False
    challenge = secrets.token_hex(32)
    try:
        # the proof names the port the server listens on: a program on this port that passes the challenge
        # on to another live `serve` of ours gets that server's port in the answer, not this one
        port = urlsplit(endpoint.url).port or 80
        answer = httpx2.get(
            endpoint.url + HEALTH_PATH, headers={HEALTH_CHALLENGE_HEADER: challenge}, timeout=timeout
        )
        given = answer.json().get("proof") if answer.status_code == 200 else None
    except Exception:
        return False
    return isinstance(given, str) and hmac.compare_digest(
        given.encode("ascii", "replace"), health_proof(token, challenge, port).encode("ascii")
    )


def health(endpoint: Endpoint, timeout: float = HEALTH_TIMEOUT_S) -> dict[str, Any] | None:
    """The server's health answer (`projectDir`, `kind`, `pid` …), or None if it did not answer in time or could
    not prove that it holds our token (`proves_token`, asked first: only such a server is sent the token)."""
    import httpx2

    deadline = time.monotonic() + timeout
    if not proves_token(endpoint, timeout):
        return None
    try:
        response = httpx2.get(
            endpoint.url + HEALTH_PATH,
            headers={"Authorization": f"Bearer {endpoint.token()}"},
            timeout=max(0.1, deadline - time.monotonic()),
        )
    except Exception:
        return None
    if response.status_code != 200:
        return None
    with contextlib.suppress(ValueError):
        body = response.json()
        if isinstance(body, dict):
            return body
    return None


def find_live(project: Path | str, timeout: float = HEALTH_TIMEOUT_S) -> Endpoint | None:
    """A running server for `project`: endpoint found, pid alive, health within `timeout`, projectDir matches."""
    for endpoint in candidate_endpoints(project):
        if not pid_alive(endpoint.pid):
            continue
        answer = health(endpoint, timeout)
        if answer is not None and covers(str(answer.get("projectDir", "")), project):
            return endpoint
    return None


# -- workspace locks ----------------------------------------------------------------------------------------


def locks_dir() -> Path:
    return state_dir() / "locks"


class LockHeld(Exception):
    """Another live process holds the workspace."""

    def __init__(self, holder: dict[str, Any]) -> None:
        super().__init__(f"held by pid {holder.get('pid')}")
        self.holder = holder


class WorkspaceLock:
    """One writer per workspace path across processes: a lock file created with O_EXCL, stale when its pid died."""

    def __init__(self, project: Path | str, owner: str) -> None:
        self.project = normalise(project)
        self.owner = owner
        """`serve` or `mcp` (the stdio bridge holding the workspace in-process)."""
        key = project_key(self.project)
        self.path = locks_dir() / f"{key}.lock"
        self.takeover_path = locks_dir() / f"{key}.takeover"
        self.held = False

    def holder(self) -> dict[str, Any] | None:
        """Who holds it now (None when free or held by a dead process)."""
        data = _read_json(self.path)
        if data is None or not pid_alive(int(data.get("pid", 0) or 0)):
            return None
        return data

    def acquire(self) -> None:
        private_state_dir(locks_dir())
        body = json.dumps(
            {"pid": os.getpid(), "owner": self.owner, "projectDir": str(self.project), "started": time.time()}
        )
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                current = self.holder()
                if current is not None:
                    if current.get("pid") == os.getpid():
                        self.held = True
                        return
                    raise LockHeld(current) from None
                with contextlib.suppress(FileNotFoundError):  # a dead holder's lock: clear it and retry
                    self.path.unlink()
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(body)
            self.held = True
            return
        raise LockHeld(self.holder() or {"pid": None})

    def release(self) -> None:
        if not self.held:
            return
        data = _read_json(self.path)
        if data is not None and data.get("pid") == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        self.held = False

    # The takeover handshake: `serve` writes a request; the holder answers by releasing the lock, or by writing
    # `refused` with its reason (unsaved changes) into the same file.
    def request_takeover(self, wait_s: float = TAKEOVER_WAIT_S) -> str | None:
        """Ask the holder to let go. None when it did, else the reason it gave (or that it did not answer)."""
        _write_json(self.takeover_path, {"pid": os.getpid(), "requested": time.time()})
        deadline = time.monotonic() + wait_s
        try:
            while time.monotonic() < deadline:
                if self.holder() is None:
                    return None
                answer = _read_json(self.takeover_path) or {}
                if answer.get("refused"):
                    return str(answer["refused"])
                time.sleep(0.1)
            return f"it did not let go within {wait_s:g} s"
        finally:
            with contextlib.suppress(FileNotFoundError):
                self.takeover_path.unlink()

    def takeover_requested(self) -> bool:
        data = _read_json(self.takeover_path)
        return data is not None and not data.get("refused")

    def refuse_takeover(self, reason: str) -> None:
        data = _read_json(self.takeover_path) or {}
        _write_json(self.takeover_path, {**data, "refused": reason})


@contextlib.contextmanager
def published(endpoint: Endpoint) -> Iterator[Publication]:
    """Write the endpoint files for the life of the block and remove our own on the way out (Ctrl-C too)."""
    import atexit
    import signal
    import threading

    publication = Publication(endpoint)
    atexit.register(publication.remove)
    # uvicorn re-raises the SIGTERM it caught once it has stopped; with the default action the process would die
    # right there, before any `finally`. Turn it into SystemExit so our files are removed.
    previous = None
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGTERM"):

        def on_term(signum: int, frame: Any) -> None:
            raise SystemExit(128 + signum)

        previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield publication
    finally:
        publication.remove()
        atexit.unregister(publication.remove)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _holder_endpoint(project: Path | str, holder: dict[str, Any]) -> Endpoint | None:
    """The published endpoint of the `serve` holding `project`'s lock, to name where the person can go instead."""
    return next((e for e in candidate_endpoints(project) if e.pid == holder.get("pid")), None)


def claim_workspace(project: Path | str) -> WorkspaceLock:
    """The workspace lock `serve` holds while it runs, taken before the workspace is read: taken over from an
    in-process bridge when that bridge has nothing unsaved. Raises `BridgeError` when it cannot be had."""
    from deskbridge.core.errors import BridgeError, ErrorCode

    lock = WorkspaceLock(project, "serve")
    try:
        lock.acquire()
    except LockHeld as held:
        holder = held.holder
        if holder.get("owner") == "cli":  # `claim_for_command`: a `pvf set` / `add` / `rm` of a few seconds
            raise BridgeError(
                ErrorCode.NOT_READY,
                f"a deskbridge command (pid {holder.get('pid')}) is writing {str(project)!r} right now",
                hint="Run `deskbridge serve` again when it has ended.",
            ) from None
        if holder.get("owner") != "mcp":
            # Name where that server is (its published endpoint), so the person can go there straight away.
            there = _holder_endpoint(project, holder)
            where = f" at {there.url}" if there is not None else ""
            raise BridgeError(
                ErrorCode.ACCESS_DENIED,
                f"{str(project)!r} is already served by deskbridge (pid {holder.get('pid')}){where}",
                hint=(
                    f"Use that server: `deskbridge open` opens its web UI, its MCP endpoint is {there.url}/mcp; "
                    "or stop it first."
                    if there is not None
                    else "Use that server (its web UI and MCP endpoint), or stop it first."
                ),
            ) from None
        reason = lock.request_takeover()
        if reason is not None:
            raise BridgeError(
                ErrorCode.UNSAVED_CHANGES if "unsaved" in reason else ErrorCode.NOT_READY,
                f"an MCP client's `deskbridge mcp` (pid {holder.get('pid')}) has {str(project)!r} open and "
                f"would not hand it over: {reason}",
                hint="Ask the agent to save (or discard) its changes, or close that MCP client, then run "
                "`deskbridge serve` again.",
            ) from None
        lock.acquire()
    return lock


def claim_for_command(target: Path | str) -> WorkspaceLock:
    """The workspace lock of `target` for one command that writes it in place (`pvf set` / `add` / `rm`), released
    by the caller when it is done. Refused (`ACCESS_DENIED`, nothing read or written) while a `serve` or an MCP
    client's `deskbridge mcp` has `target` open — that session would not see the change, and its next save would
    be refused — or while another such command writes it: two at once could both pass the check that the file
    is still the one they read, right before the rename, and the first one's change would be lost."""
    from deskbridge.core.errors import BridgeError, ErrorCode

    lock = WorkspaceLock(target, "cli")
    try:
        lock.acquire()
    except OSError as exc:  # the state folder cannot be written: say so instead of a traceback
        raise BridgeError(
            ErrorCode.ACCESS_DENIED,
            f"cannot take the lock of {str(target)!r} in {locks_dir()}: {exc.strerror or exc}; nothing was written",
            "Fix the permissions of that folder (or point DESKBRIDGE_HOME elsewhere), or write a copy with "
            "-o NEW.pvf.",
        ) from None
    except LockHeld as held:
        holder = held.holder
        pid = holder.get("pid")
        owner = holder.get("owner")
        if owner == "cli":
            message = (
                f"another deskbridge command (pid {pid}) is writing {str(target)!r}; nothing was written"
            )
            hint = "Wait for it to end, then run this command again: it applies your change to the archive as it is then."
        else:
            there = _holder_endpoint(target, holder)
            who = "deskbridge serve" if owner == "serve" else "an MCP client's `deskbridge mcp`"
            where = f" at {there.url}" if there is not None else ""
            message = (
                f"{str(target)!r} is open in {who} (pid {pid}){where}; a change written here would not be seen "
                "there and that session's next save would be refused; nothing was written"
            )
            hint = (
                "Make the change in that session (its web UI: `deskbridge open`; or its MCP tools), or save "
                "and stop it first; or write a copy with -o NEW.pvf."
            )
        raise BridgeError(ErrorCode.ACCESS_DENIED, message, hint, data={"holder": holder}) from None
    return lock


@contextlib.contextmanager
def announced(project: Path | str | None, *, kind: str, url: str, token_file: Path | str) -> Iterator[None]:
    """The endpoint files of one `serve`, for the life of the block."""
    from deskbridge import __version__

    if project is None:
        yield
        return
    endpoint = Endpoint(
        url=url,
        token_file=str(token_file),
        pid=os.getpid(),
        kind=kind,
        project_dir=str(normalise(project)),
        started=time.time(),
        version=__version__,
    )
    from deskbridge.integrations.launcher import launcher_path, write_launcher

    if launcher_path().exists():  # refresh it, so configs that name it follow this installation
        with contextlib.suppress(OSError):
            write_launcher()
    with published(endpoint):
        yield
