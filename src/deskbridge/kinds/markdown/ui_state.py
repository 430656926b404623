"""The editor's view state (theme, typography, language, layout, sidebar tab) kept on the server as the one truth.

The browser and the `md_ui_*` tools both change it through `UiState`; every change is published on the event
bus topic `ui` so open browser tabs apply it live. Allowed values follow the Vex plan (seeds/vex-mcp-plan.zh.md
§7.6); the typography themes are our own CSS carrying Vex's key names so Vex-style callers keep working.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Protocol

from deskbridge.core.errors import BridgeError, ErrorCode

THEMES: Final = ("system", "light", "dark", "aquatic", "desert", "dusk", "night-sky")
"""App colour themes (seed §7.6 `ui_set_theme`)."""

TYPOGRAPHIES: Final = (
    "Basic",
    "Simple",
    "OrangeHeart",
    "InkBlack",
    "TechnologyBlue",
    "TenderGreen",
    "RosePurple",
    "GeekBlack",
)
"""Typography (preview) themes. Names match Vex's keys; the CSS is written for deskbridge (not mdnice's GPL CSS)."""

LANGUAGES: Final = ("zh-CN", "zh-Hant", "en-US", "ja-JP")
"""UI languages (seed §7.6 `ui_set_language`)."""

SIDEBAR_TABS: Final = ("files", "outline")

PANELS: Final = (
    "find",
    "replace",
    "properties",
    "wordCount",
    "mcpSettings",
    "audit",
    "changelog",
    "thanks",
    "about",
)
"""Panels a tool may open (seed §7.6 plus `audit`); website, feedback and onboarding stay closed to AI on purpose."""

EDITOR_COMMANDS: Final = (
    "undo",
    "redo",
    "copy",
    "selectAll",
    "paragraph",
    "heading1",
    "heading2",
    "heading3",
    "bold",
    "italic",
    "inlineCode",
    "link",
    "image",
    "quote",
    "orderedList",
    "unorderedList",
    "taskList",
    "codeFence",
    "mathBlock",
    "table",
    "horizontalRule",
    "clearFormatting",
)
"""Editor commands (seed §7.6); cut and paste are left out because they touch the person's clipboard."""

LAYOUT_FIELDS: Final = {
    "sidebarVisible": "isSidebarVisible",
    "statusBarVisible": "isStatusBarVisible",
    "previewVisible": "isPreviewVisible",
    "sourceMode": "isSourceMode",
    "lineNumbersVisible": "showLineNumbers",
    "compactLayout": "isCompactLayout",
}
"""`ui_set_layout` argument name → the `ui_get_state` field it changes (the seed uses both spellings)."""

PERSON_ONLY_SWITCH: Final = "allowRemoteImages"
"""Whether the preview loads remote images without a click (default off: a tracking pixel tells the document's
author that and when it was read). Set in the editor's View menu only: no md_ui_* tool changes it."""

UI_TOPIC: Final = "ui"


class EventSink(Protocol):
    """Anything with the core event bus's `publish(topic, data)`."""

    def publish(self, topic: str, data: Any) -> Any: ...


def pick(value: str, allowed: tuple[str, ...], what: str) -> str:
    """Return the allowed spelling of `value` (case-insensitive), or raise INVALID_ARGUMENT listing the choices."""
    if isinstance(value, str):
        folded = value.strip().casefold()
        for choice in allowed:
            if choice.casefold() == folded:
                return choice
    raise BridgeError(
        ErrorCode.INVALID_ARGUMENT,
        f"{what} {value!r} is not one of: {', '.join(allowed)}",
        hint=f"Pass one of the allowed {what} values exactly as listed.",
        data={"allowed": list(allowed)},
    )


def default_state() -> dict[str, Any]:
    """A fresh state: the seed's `ui_get_state` shape with our defaults."""
    return {
        "theme": "system",
        "typography": "Simple",
        "cultureName": "en-US",
        "isCompactLayout": False,
        "isSidebarVisible": True,
        "selectedSidebarTab": "outline",
        "isPreviewVisible": True,
        "isSourceMode": True,
        "showLineNumbers": True,
        "isStatusBarVisible": True,
        "allowRemoteImages": False,
    }


UI_STATE_FILE: Final = "markdown-ui.json"
"""File in the config directory that keeps the view state between runs (see `UiState.persistent`)."""


def load_saved_state(path: Path) -> dict[str, Any]:
    """The saved view state, keeping only fields that are still valid (an old or hand-edited file never fails)."""
    try:
        raw = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    kept: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            kept.update(UiState._validated({key: value}))
        except BridgeError:
            continue
    return kept


def save_state(path: Path, state: Mapping[str, Any]) -> None:
    """Write the view state atomically (owner-only; it is harmless, but it is the person's)."""
    from deskbridge.core.files import atomic_write

    data = {k: v for k, v in state.items() if k != "revision"}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(
        path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"), new_file_mode=0o600
    )


class UiState:
    """The view state shared by every browser tab and every MCP client; thread-safe, publishes each change.

    A lock (not an asyncio lock) because sync tool handlers may run in worker threads.
    """

    def __init__(
        self,
        events: EventSink | None = None,
        initial: Mapping[str, Any] | None = None,
        on_change: Callable[[dict[str, Any]], None] | None = None,
        editor_open: Callable[[], bool] | None = None,
    ) -> None:
        self._events = events
        self._on_change = on_change
        self._editor_open = editor_open
        """Whether an editor tab listens (e.g. the approval broker's `ui_attached`); None when unknown."""
        self._lock = threading.Lock()
        self._state = default_state()
        self._revision = 0
        if initial:
            self._state.update(self._validated(initial))

    @classmethod
    def persistent(
        cls, path: Path, events: EventSink | None = None, editor_open: Callable[[], bool] | None = None
    ) -> UiState:
        """A UiState that starts from the file at `path` and writes every change back to it."""
        return cls(
            events=events,
            initial=load_saved_state(path),
            on_change=lambda state: save_state(path, state),
            editor_open=editor_open,
        )

    # -- reading -----------------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The current state plus its revision (advances on every change)."""
        with self._lock:
            return {**self._state, "revision": self._revision}

    # -- changing ----------------------------------------------------------------------------------------
    def update(self, changes: Mapping[str, Any], *, source: str = "ui") -> dict[str, Any]:
        """Apply a partial state (ui_get_state field names), validate every field first, publish, return it."""
        clean = self._validated(changes)
        with self._lock:
            changed = {k: v for k, v in clean.items() if self._state.get(k) != v}
            if changed:
                self._state.update(changed)
                self._revision += 1
            state = {**self._state, "revision": self._revision}
        if changed:
            self._publish({"kind": "state", "state": state, "changed": sorted(changed), "source": source})
            if self._on_change is not None:
                self._on_change(dict(state))
        return state

    def set_theme(self, theme: str, *, source: str = "ui") -> dict[str, Any]:
        return self.update({"theme": theme}, source=source)

    def set_typography(self, typography: str, *, source: str = "ui") -> dict[str, Any]:
        return self.update({"typography": typography}, source=source)

    def set_language(self, culture: str, *, source: str = "ui") -> dict[str, Any]:
        return self.update({"cultureName": culture}, source=source)

    def set_layout(self, layout: Mapping[str, bool | None], *, source: str = "ui") -> dict[str, Any]:
        """Change only the layout switches given (seed names: sidebarVisible, previewVisible, …)."""
        changes: dict[str, Any] = {}
        for name, value in layout.items():
            if value is None:
                continue
            if name not in LAYOUT_FIELDS:
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"layout switch {name!r} is not one of: {', '.join(LAYOUT_FIELDS)}",
                    data={"allowed": list(LAYOUT_FIELDS)},
                )
            changes[LAYOUT_FIELDS[name]] = value
        return self.update(changes, source=source)

    def show_sidebar_tab(self, tab: str, *, source: str = "ui") -> dict[str, Any]:
        """Select a sidebar tab and make the sidebar visible (showing a tab of a hidden sidebar would do nothing)."""
        return self.update({"selectedSidebarTab": tab, "isSidebarVisible": True}, source=source)

    # -- one-shot actions (not state): they need an open editor to mean anything --------------------------
    def open_panel(self, panel: str, *, source: str = "ui") -> str:
        chosen = pick(panel, PANELS, "panel")
        self._require_editor(f"open the {chosen} panel")
        self._publish({"kind": "panel", "panel": chosen, "source": source})
        return chosen

    def refresh_preview(self, *, source: str = "ui") -> None:
        self._require_editor("refresh the preview")
        self._publish({"kind": "refresh", "source": source})

    def apply_editor_command(self, command: str, *, source: str = "ui") -> str:
        chosen = pick(command, EDITOR_COMMANDS, "command")
        self._require_editor(f"run {chosen}")
        self._publish({"kind": "command", "command": chosen, "source": source})
        return chosen

    def require_editor(self, what: str) -> None:
        """UI_NOT_READY when no editor tab listens."""
        self._require_editor(what)

    def publish_ui(self, data: dict[str, Any]) -> None:
        """Publish on the `ui` topic (editor commands that wait for the editor's answer)."""
        self._publish(data)

    def _require_editor(self, what: str) -> None:
        if self._editor_open is not None and not self._editor_open():
            raise BridgeError(
                ErrorCode.UI_NOT_READY,
                f"cannot {what}: no editor is open",
                hint="Ask the person to open the deskbridge editor (the URL `deskbridge serve` printed), then retry.",
            )

    # -- internals ---------------------------------------------------------------------------------------
    def _publish(self, data: dict[str, Any]) -> None:
        if self._events is not None:
            self._events.publish(UI_TOPIC, data)

    @staticmethod
    def _validated(changes: Mapping[str, Any]) -> dict[str, Any]:
        choices: dict[str, tuple[tuple[str, ...], str]] = {
            "theme": (THEMES, "theme"),
            "typography": (TYPOGRAPHIES, "typography"),
            "cultureName": (LANGUAGES, "language"),
            "selectedSidebarTab": (SIDEBAR_TABS, "sidebar tab"),
        }
        switches = set(LAYOUT_FIELDS.values()) | {PERSON_ONLY_SWITCH}
        clean: dict[str, Any] = {}
        for key, value in changes.items():
            if key in choices:
                allowed, what = choices[key]
                clean[key] = pick(value, allowed, what)
            elif key in switches:
                if not isinstance(value, bool):
                    raise BridgeError(
                        ErrorCode.INVALID_ARGUMENT, f"{key} must be true or false, got {value!r}"
                    )
                clean[key] = value
            elif key == "revision":
                continue
            else:
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"unknown UI state field {key!r}",
                    data={"allowed": [*choices, *sorted(switches)]},
                )
        return clean
