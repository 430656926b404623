"""Every numeric limit of the engine in one place, each named with its unit.

Kinds and transports import these instead of writing their own numbers, so a limit is changed once.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # `typing` is not loaded on the short paths that read a count
if TYPE_CHECKING:
    from typing import Final

MIB: Final = 1024 * 1024


def env_count(name: str) -> int | None:
    """A count chosen in the environment variable `name` (how many worker processes a build starts): None
    when it is unset, 0 when it is not a number, never negative."""
    raw = os.environ.get(name)
    if raw is None:
        return None
    try:
        return max(int(raw), 0)
    except ValueError:
        return 0


REQUEST_HISTORY_MAX: Final = 256
"""How many requestId results each caller's de-duplication history keeps (oldest dropped first)."""

TASK_HISTORY_MAX: Final = 256
"""How many finished tasks are kept for status queries."""

TASK_HISTORY_TTL_S: Final = 30 * 60
"""Seconds a finished task stays queryable (30 min)."""

TASK_LOG_MAX_ENTRIES: Final = 5000
"""Entries in one task's log ring; older entries are dropped and the read says `truncated`."""

TASK_LOG_ENTRY_MAX_BYTES: Final = 4 * 1024
"""Bytes of one log entry (UTF-8); longer entries are cut and marked."""

TASK_LOG_TOTAL_MAX_BYTES: Final = 1 * MIB
"""Bytes of one task's whole log ring."""

TASK_LOG_PAGE_MAX_BYTES: Final = 64 * 1024
"""Bytes of log returned by one read."""

PLAN_TTL_S: Final = 10 * 60
"""Seconds a change plan stays appliable (10 min)."""

PLAN_PAGE_MAX_ITEMS: Final = 200
"""Changes in one page of a plan preview."""

PLAN_PAGE_MAX_BYTES: Final = 256 * 1024
"""Bytes of diff text in one page of a plan preview."""

RESPONSE_MAX_BYTES: Final = 512 * 1024
"""Bytes of one tool response body (text), well under the clients' own caps (Claude Code: 25k tokens)."""

LIST_PAGE_DEFAULT: Final = 100
"""Items in a list page when the caller gives no limit."""

LIST_PAGE_MAX: Final = 1000
"""Items in a list page at most."""

IMPORT_MAX_FILES: Final = 10_000
IMPORT_FILE_MAX_BYTES: Final = 8 * MIB
IMPORT_TOTAL_MAX_BYTES: Final = 64 * MIB
EXPORT_MAX_FILES: Final = 10_000
EXPORT_TOTAL_MAX_BYTES: Final = 128 * MIB

SCRIPT_SOURCE_MAX_BYTES: Final = 1 * MIB
SCRIPT_TIMEOUT_S: Final = 5 * 60

UI_BARRIER_TIMEOUT_S: Final = 3.0
"""Seconds the draft barrier waits for every connected editor to answer."""

APPROVAL_TIMEOUT_S: Final = 120.0
"""Seconds a person has to answer an approval request before it counts as declined."""

AUDIT_MEMORY_MAX: Final = 1000
"""Audit records kept in memory."""

PATH_MAX_CHARS: Final = 4096
"""Characters of a path argument at most."""

EVENT_QUEUE_MAX: Final = 1000
"""Events buffered per event-bus subscriber; past it the subscriber gets one `lagged` event instead."""

AUDIT_TARGET_MAX_CHARS: Final = 512
"""Characters of an audit record's target (a path or a name); longer targets are cut and marked."""

APPROVAL_DIFF_MAX_BYTES: Final = 64 * 1024
"""Bytes of diff text shown in one approval request (UTF-8); longer diffs are cut and marked."""

APPROVAL_ELICIT_DIFF_MAX_CHARS: Final = 4000
"""Characters of the diff put into an approval question asked through the client (MCP elicitation): a client
shows the message as plain text in a dialog, so a longer diff is cut there and the question says where to see it
whole (the deskbridge page)."""

APPROVAL_PENDING_MAX: Final = 64
"""Approval requests waiting for an answer at once; one more is declined as over the limit."""

PATH_COMPONENT_MAX_BYTES: Final = 255
"""Bytes (UTF-8) of one path component, the common file-system maximum (ext4, NTFS, APFS)."""

# --------------------------------------------------------------------------------------------- the HTTP server

REQUEST_BODY_MAX_BYTES: Final = 8 * MIB
"""Bytes of one HTTP request body (an MCP message or a UI API call). The same number is the `maxLength` the tool
schemas advertise for their largest text arguments, so the schema and the transport never disagree about which
calls can be made (a character takes at least one byte, so multibyte text reaches the byte limit sooner; the
error then names this limit). A bigger MCP tool call is answered with an `isError` result naming it."""

LOGIN_CODE_TTL_S: Final = 60.0
"""Seconds a one-time login code (the browser's way in, never the UI secret itself) stays valid."""

LOGIN_CODES_MAX: Final = 16
"""One-time login codes outstanding at once; issuing one more drops the oldest."""

TOKEN_REVEAL_TTL_S: Final = 60.0
"""Seconds a person has to confirm "show the MCP token" in the page once the page asked for it."""

HTTP_HEADER_TIMEOUT_S: Final = 5.0
"""Seconds a connection may take to send a request's headers (from connecting, or from the first byte of a
next request); then it is closed (slowloris)."""

HTTP_HEADER_MAX_BYTES: Final = 64 * 1024
"""Bytes of one request's start line and headers at most (431 past it)."""

HTTP_BODY_IDLE_TIMEOUT_S: Final = 15.0
"""Seconds a request body may stall (no byte received while the server waits for more); then it is closed."""

HTTP_KEEP_ALIVE_S: Final = 5
"""Seconds an idle keep-alive connection is kept open between requests."""

HTTP_CONNECTIONS_MAX: Final = 256
"""Open HTTP connections at most. At the cap a new connection takes the place of the one that has waited longest
without sending a complete request; when every connection is busy with a request, the new one is refused."""

MCP_SESSIONS_MAX: Final = 256
"""Stateful (handshake-era) MCP sessions at once; one more ends the least recently used session."""

MCP_SESSION_IDLE_TIMEOUT_S: Final = 10 * 60
"""Seconds an MCP session with no request in flight is kept (10 min); then it ends and its id answers 404."""
