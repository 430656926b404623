"""The `md_ui_*` MCP tools: let an AI read and change the editor's view (theme, language, layout, panels, commands).

Each tool changes `UiState` (the server-side truth) which publishes on the `ui` topic; the browser applies it live.
Names and allowed values follow the Vex plan (seeds/vex-mcp-plan.zh.md §7.6, §16.2); Vex's `vex_ui_*` and dotted
`vex.ui_*` names are accepted as aliases.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from deskbridge.core.tools import CallContext, NoArgs, ToolArgs, ToolSpec
from deskbridge.kinds.markdown.editor_commands import UI_ONLY_COMMANDS, run_agent_command
from deskbridge.kinds.markdown.ui_state import (
    EDITOR_COMMANDS,
    LANGUAGES,
    PANELS,
    SIDEBAR_TABS,
    THEMES,
    TYPOGRAPHIES,
    UiState,
    pick,
)


def _choice(alias: str, allowed: tuple[str, ...], description: str) -> Any:
    # A plain string with an `enum` in the schema: clients see the choices, and the handler accepts any casing
    # ("simple" for "Simple") and answers a wrong value with INVALID_ARGUMENT listing the choices.
    return Field(alias=alias, description=description, json_schema_extra={"enum": list(allowed)})


class SetThemeArgs(ToolArgs):
    theme_key: str = _choice("themeKey", THEMES, "App colour theme.")


class SetTypographyArgs(ToolArgs):
    typography_key: str = _choice(
        "typographyKey", TYPOGRAPHIES, "Typography theme of the preview and exports."
    )


class SetLanguageArgs(ToolArgs):
    culture_name: str = _choice("cultureName", LANGUAGES, "UI language.")


class SetLayoutArgs(ToolArgs):
    sidebar_visible: bool | None = Field(None, alias="sidebarVisible", description="Show the sidebar.")
    status_bar_visible: bool | None = Field(
        None, alias="statusBarVisible", description="Show the status bar."
    )
    preview_visible: bool | None = Field(None, alias="previewVisible", description="Show the preview pane.")
    source_mode: bool | None = Field(None, alias="sourceMode", description="Show the Markdown source pane.")
    line_numbers_visible: bool | None = Field(
        None, alias="lineNumbersVisible", description="Show line numbers in the source pane."
    )
    compact_layout: bool | None = Field(None, alias="compactLayout", description="Smaller type and spacing.")


class ShowSidebarTabArgs(ToolArgs):
    tab: str = _choice("tab", SIDEBAR_TABS, "Sidebar tab to show (also shows the sidebar).")


class OpenPanelArgs(ToolArgs):
    panel: str = _choice("panel", PANELS, "Panel to open in the editor.")


class EditorCommandArgs(ToolArgs):
    command: str = _choice("command", EDITOR_COMMANDS, "Editor command, applied at the person's cursor.")


def _aliases(short: str) -> tuple[str, ...]:
    return (f"vex_{short}", f"vex.{short}")


def markdown_ui_tools(service: Any, ui_state: UiState) -> list[ToolSpec]:
    """The `md_ui_*` tool list the lead registers in MCP; `service` runs editor commands that change text."""

    def source(ctx: CallContext) -> str:
        return ctx.caller

    def get_state(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
        return ui_state.snapshot()

    def set_theme(ctx: CallContext, args: SetThemeArgs) -> dict[str, Any]:
        return ui_state.set_theme(args.theme_key, source=source(ctx))

    def set_typography(ctx: CallContext, args: SetTypographyArgs) -> dict[str, Any]:
        return ui_state.set_typography(args.typography_key, source=source(ctx))

    def set_language(ctx: CallContext, args: SetLanguageArgs) -> dict[str, Any]:
        return ui_state.set_language(args.culture_name, source=source(ctx))

    def set_layout(ctx: CallContext, args: SetLayoutArgs) -> dict[str, Any]:
        return ui_state.set_layout(args.model_dump(by_alias=True), source=source(ctx))

    def show_sidebar_tab(ctx: CallContext, args: ShowSidebarTabArgs) -> dict[str, Any]:
        return ui_state.show_sidebar_tab(args.tab, source=source(ctx))

    def open_panel(ctx: CallContext, args: OpenPanelArgs) -> dict[str, Any]:
        return {"opened": ui_state.open_panel(args.panel, source=source(ctx))}

    def refresh_preview(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
        ui_state.refresh_preview(source=source(ctx))
        return {"refreshed": True}

    def apply_editor_command(ctx: CallContext, args: EditorCommandArgs) -> Any:
        command = pick(args.command, EDITOR_COMMANDS, "command")
        if command in UI_ONLY_COMMANDS or service is None:
            command = ui_state.apply_editor_command(command, source=source(ctx))
            return {"command": command, "sent": True, "note": "The open editor runs it; it changes no text."}
        ui_state.require_editor(f"run {command}")
        # a command that changes text is an AI edit: prepared by the editor, approved with its diff (the
        # platform awaits the returned coroutine on its loop)
        return run_agent_command(service, ui_state.publish_ui, ctx, command)

    return [
        ToolSpec(
            "md_ui_get_state",
            "Get editor view state",
            "Read the editor's theme, typography, language, layout switches and selected sidebar tab.",
            NoArgs,
            get_state,
            read_only=True,
            idempotent=True,
            aliases=_aliases("ui_get_state"),
        ),
        ToolSpec(
            "md_ui_set_theme",
            "Set colour theme",
            f"Switch the editor's colour theme. themeKey: {', '.join(THEMES)}.",
            SetThemeArgs,
            set_theme,
            idempotent=True,
            aliases=_aliases("ui_set_theme"),
        ),
        ToolSpec(
            "md_ui_set_typography",
            "Set typography theme",
            f"Switch the preview's typography theme. typographyKey: {', '.join(TYPOGRAPHIES)}.",
            SetTypographyArgs,
            set_typography,
            idempotent=True,
            aliases=_aliases("ui_set_typography"),
        ),
        ToolSpec(
            "md_ui_set_language",
            "Set UI language",
            f"Switch the editor's interface language. cultureName: {', '.join(LANGUAGES)}.",
            SetLanguageArgs,
            set_language,
            idempotent=True,
            aliases=_aliases("ui_set_language"),
        ),
        ToolSpec(
            "md_ui_set_layout",
            "Set layout",
            "Show or hide sidebar, status bar, preview, source pane and line numbers, or use the compact layout. "
            "Only the switches you pass change. Full screen and always-on-top are not offered.",
            SetLayoutArgs,
            set_layout,
            idempotent=True,
            aliases=_aliases("ui_set_layout"),
        ),
        ToolSpec(
            "md_ui_show_sidebar_tab",
            "Show sidebar tab",
            "Show the file list ('files') or the outline ('outline') in the sidebar.",
            ShowSidebarTabArgs,
            show_sidebar_tab,
            idempotent=True,
            aliases=_aliases("ui_show_sidebar_tab"),
        ),
        ToolSpec(
            "md_ui_open_panel",
            "Open panel",
            f"Open a panel in the editor. panel: {', '.join(PANELS)}.",
            OpenPanelArgs,
            open_panel,
            idempotent=True,
            aliases=_aliases("ui_open_panel"),
        ),
        ToolSpec(
            "md_ui_refresh_preview",
            "Refresh preview",
            "Re-render the preview in every open editor.",
            NoArgs,
            refresh_preview,
            idempotent=True,
            aliases=_aliases("ui_refresh_preview"),
        ),
        ToolSpec(
            "md_ui_apply_editor_command",
            "Apply editor command",
            "Run a formatting or editing command (the `command` values) in the open editor at the person's "
            "cursor or selection. One that changes text is an AI edit, approved with its diff; undo/redo touch "
            "only AI changes, never the person's typing.",
            EditorCommandArgs,
            apply_editor_command,
            destructive=True,  # it changes the document's text (cut, delete line, replace selection …)
            aliases=_aliases("ui_apply_editor_command"),
        ),
    ]
