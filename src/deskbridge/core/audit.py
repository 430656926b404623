"""Audit trail of operations: who called which tool on what, the outcome and the approval — never content or tokens.

A record keeps argument *names* only (never values), so a path, a script, a document or a secret passed
as an argument cannot end up in memory history or on disk. The last `AUDIT_MEMORY_MAX` records stay in
memory; optionally every record is also appended to a JSON-lines file, one `os.write` per line on an
`O_APPEND` descriptor so concurrent writers never interleave inside a line.

Thread-safety: `record` may be called from any thread (a `threading.Lock` guards memory and file).
"""

from __future__ import annotations

import contextvars
import json
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from deskbridge.core import limits
from deskbridge.core.errors import BridgeError


class Approval(StrEnum):
    """Whether a person was asked before the operation ran, and what they said."""

    NONE = "none"
    APPROVED = "approved"
    DECLINED = "declined"
    TIMED_OUT = "timed_out"
    """Asked, but nobody answered in time (not a "no": the person may not have seen it)."""
    NO_ONE_TO_ASK = "no_one_to_ask"
    """Needed approval, but no browser page was open and the client could not ask."""


@dataclass(frozen=True)
class AuditRecord:
    """One operation: `outcome` is 'ok' or the error code; `args` are argument names, never values."""

    caller: str
    client: str
    tool: str
    target: str
    outcome: str
    approval: Approval = Approval.NONE
    duration_ms: float = 0.0
    timestamp: float = field(default_factory=time.time)
    args: tuple[str, ...] = ()
    approved_via: str = ""
    """Where the person was asked: 'browser' (the deskbridge page), 'client' (MCP elicitation), or '' (nobody)."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["approval"] = str(self.approval)
        out["args"] = list(self.args)
        return out


AUDIT_TARGET: contextvars.ContextVar[str | None] = contextvars.ContextVar("AUDIT_TARGET", default=None)
"""What the running tool call is about, when the arguments alone do not say (a docId-less call acts on the
current document): a tool sets it, `App.invoke` records it. A path or a name, never content."""


def set_audit_target(target: str | None) -> None:
    """Name what the current tool call acts on, for its one audit record (see `AUDIT_TARGET`)."""
    AUDIT_TARGET.set(target or None)


def _clean_target(target: str) -> str:
    target = str(target).replace("\n", " ").replace("\r", " ")
    cap = limits.AUDIT_TARGET_MAX_CHARS
    return target if len(target) <= cap else target[: cap - 1] + "…"


class OperationRecorder:
    """Handed out by `AuditLog.track`: lets the operation set its target and approval before it ends."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.approval = Approval.NONE


class AuditLog:
    """Memory ring of recent records plus an optional append-only JSON-lines file."""

    def __init__(self, path: Path | str | None = None, memory_max: int = limits.AUDIT_MEMORY_MAX) -> None:
        self.path = Path(path) if path is not None else None
        self._records: deque[AuditRecord] = deque(maxlen=memory_max)
        self._lock = threading.Lock()

    def record(
        self,
        *,
        caller: str,
        client: str,
        tool: str,
        target: str = "",
        outcome: str = "ok",
        approval: Approval | str = Approval.NONE,
        duration_ms: float = 0.0,
        arg_names: Iterable[str] = (),
        approved_via: str | None = None,
    ) -> AuditRecord:
        """Store one record. Pass argument names (e.g. `args.keys()`), not the arguments themselves."""
        rec = AuditRecord(
            approved_via=str(approved_via or ""),
            caller=caller,
            client=client,
            tool=tool,
            target=_clean_target(target),
            outcome=str(outcome),
            approval=Approval(approval),
            duration_ms=round(float(duration_ms), 3),
            args=tuple(sorted({str(n) for n in arg_names})),
        )
        line = None
        if self.path is not None:  # encoded only for the file: the memory ring keeps the record itself
            line = (json.dumps(rec.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        with self._lock:
            self._records.append(rec)
            if line is not None:
                self._append(line)
        return rec

    def _append(self, line: bytes) -> None:
        # One write on an O_APPEND descriptor: the kernel positions and writes the whole line at the end
        # atomically with respect to other appenders of this file (POSIX write(2), local file systems).
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            view = memoryview(line)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        finally:
            os.close(fd)

    @contextmanager
    def track(
        self, *, caller: str, client: str, tool: str, target: str = "", arg_names: Iterable[str] = ()
    ) -> Iterator[OperationRecorder]:
        """Time an operation and record it on exit: 'ok', the `BridgeError` code, or INTERNAL."""
        rec = OperationRecorder(target)
        start = time.perf_counter()
        outcome = "ok"
        try:
            yield rec
        except BridgeError as exc:
            outcome = str(exc.code)
            raise
        except BaseException:
            outcome = "INTERNAL"
            raise
        finally:
            self.record(
                caller=caller,
                client=client,
                tool=tool,
                target=rec.target,
                outcome=outcome,
                approval=rec.approval,
                duration_ms=(time.perf_counter() - start) * 1000,
                arg_names=arg_names,
            )

    def recent(self, limit: int | None = None) -> list[AuditRecord]:
        """Newest last; at most `limit` records (all kept records when None)."""
        with self._lock:
            items = list(self._records)
        return items if limit is None else items[-limit:] if limit > 0 else []

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)
