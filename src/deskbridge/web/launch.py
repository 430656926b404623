"""How a browser gets into the UI without the UI secret ever being on a command line or in a URL.

`deskbridge serve` used to open `http://127.0.0.1:PORT/?k=SECRET`: the browser's command line showed the secret to
every local user (`ps`), and the secret then opened `/api/token`. Now (as Jupyter does):

* the server keeps one-time login codes (`web.security.LoginCodes`: single use, valid `LOGIN_CODE_TTL_S`);
* `write_login_page` writes an owner-only (0600) HTML file in the owner-only runtime directory that forwards the
  browser to `/?k=CODE`, and the browser is started on that file's `file://` path — a path is not a secret;
* the server exchanges the code for the per-launch UI secret in a strict HttpOnly cookie and forgets the code;
* `ServerRecord` — an owner-only file per running server (port, address, UI secret) so that `deskbridge open`
  (same user) can ask the running server for a fresh code later (`POST /api/login-code`), write a fresh login
  page and open it. The record is removed when the server stops.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import atomic_write
from deskbridge.integrations.endpoints import pid_alive
from deskbridge.settings import Dirs, private_dir, read_small_file

RECORD_PREFIX = "server-"


def login_page_path(dirs: Dirs, port: int) -> Path:
    return dirs.run / f"open-{port}.html"


def write_login_page(dirs: Dirs, port: int, url: str) -> Path:
    """An owner-only page that sends the browser to `url` (which carries a one-time code) at once."""
    private_dir(dirs.run)
    path = login_page_path(dirs, port)
    target = html.escape(url, quote=True)
    script_url = json.dumps(url).replace("<", "\\u003c")
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<meta http-equiv="refresh" content="0;url={target}">
<title>Opening deskbridge…</title></head>
<body style="font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:4rem auto">
<p>Opening <a href="{target}">deskbridge</a>…</p>
<p>This page holds a one-time link that works once, within a minute. If it says the link was used or expired,
run <code>deskbridge open</code> in a terminal for a fresh one.</p>
<script>location.replace({script_url});</script>
</body></html>
"""
    atomic_write(path, page.encode("utf-8"), mode=0o600)
    return path


def remove_login_page(dirs: Dirs, port: int) -> None:
    """When the server on `port` stops, its login page goes too: the code in it is spent or expired, and the
    next server on that port writes its own."""
    with contextlib.suppress(OSError):
        login_page_path(dirs, port).unlink()


@dataclass
class ServerRecord:
    """The owner-only file that lets `deskbridge open` reach this running server."""

    path: Path

    @classmethod
    def write(cls, dirs: Dirs, *, port: int, base_url: str, ui_secret: str) -> ServerRecord:
        private_dir(dirs.run)
        path = dirs.run / f"{RECORD_PREFIX}{port}.json"
        data = {
            "pid": os.getpid(),
            "port": port,
            "url": base_url,
            "uiSecret": ui_secret,
            "started": time.time(),
        }
        atomic_write(path, json.dumps(data).encode("utf-8"), mode=0o600)
        return cls(path)

    def remove(self) -> None:
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except (OSError, ValueError):
            return
        if data.get("pid") == os.getpid():  # a newer server on the same port may have replaced it
            with contextlib.suppress(OSError):
                self.path.unlink()


def running_servers(dirs: Dirs) -> list[dict[str, Any]]:
    """The records of servers of this user that are still running, newest first."""
    found = []
    try:
        names = sorted(os.listdir(dirs.run))
    except OSError:
        return []
    for name in names:
        if not (name.startswith(RECORD_PREFIX) and name.endswith(".json")):
            continue
        try:
            data = json.loads(read_small_file(dirs.run / name) or "{}")
        except (BridgeError, ValueError):
            continue
        pid = data.get("pid") if isinstance(data, dict) else None
        if not isinstance(pid, int) or not pid_alive(pid):
            continue
        found.append(data)
    return sorted(found, key=lambda d: d.get("started", 0), reverse=True)


def fresh_login_url(dirs: Dirs, port: int | None = None) -> tuple[str, int]:
    """Ask the running server (the one on `port`, or the only one) for a one-time login link."""
    import httpx2

    servers = running_servers(dirs)
    if port is not None:
        servers = [s for s in servers if s.get("port") == port]
    if not servers:
        where = f" on port {port}" if port is not None else ""
        raise BridgeError(
            ErrorCode.NOT_FOUND,
            f"no running deskbridge server{where} was found",
            hint="Start one with `deskbridge serve PATH` (it opens the browser itself).",
        )
    if len(servers) > 1:
        ports = ", ".join(str(s.get("port")) for s in servers)
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"several deskbridge servers are running (ports {ports})",
            hint="Say which one: `deskbridge open --port PORT`.",
        )
    server = servers[0]
    base = str(server["url"])
    try:
        response = httpx2.post(
            f"{base}/api/login-code", headers={"X-Deskbridge-UI": str(server["uiSecret"])}, timeout=10
        )
        response.raise_for_status()
        code = response.json()["code"]
    except Exception as exc:
        raise BridgeError(
            ErrorCode.NOT_READY,
            f"the deskbridge server at {base} did not answer ({type(exc).__name__})",
            hint="Is it still running? Start it again with `deskbridge serve PATH`.",
        ) from exc
    return f"{base}/?k={code}", int(server["port"])


def apply_to_running(dirs: Dirs, settings: dict[str, Any]) -> list[tuple[int, str | None]]:
    """Hand saved settings to every running server of this user (`deskbridge config set`).

    Each server validates and applies them in place (`App.update_settings`, the settings panel's path), so they
    take effect without a restart. Returns `(port, None)` per server that took them, `(port, reason)` otherwise.
    """
    import httpx2

    results: list[tuple[int, str | None]] = []
    for server in running_servers(dirs):
        port = int(server.get("port", 0))
        try:
            response = httpx2.post(
                f"{server['url']}/api/settings",
                json=settings,
                headers={"X-Deskbridge-UI": str(server["uiSecret"])},
                timeout=10,
            )
        except Exception as exc:
            results.append((port, f"did not answer ({type(exc).__name__})"))
            continue
        if response.status_code == 200:
            results.append((port, None))
        else:
            try:
                reason = str(response.json()["error"]["message"])
            except Exception:
                reason = f"HTTP {response.status_code}"
            results.append((port, reason))
    return results
