"""The md_ui_* tools as an AI client calls them: read the view state, switch theme/language/layout, send commands."""

from __future__ import annotations

import pytest

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.tools import TOOL_NAME_PATTERN, CallContext
from deskbridge.kinds.markdown.ui_state import EDITOR_COMMANDS, PANELS, THEMES, TYPOGRAPHIES, UiState
from deskbridge.kinds.markdown.ui_tools import markdown_ui_tools

AI = CallContext(caller="mcp:claude", client_name="Claude")


class Bus:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def publish(self, topic: str, data: dict) -> None:
        self.events.append((topic, data))


@pytest.fixture
def bus() -> Bus:
    return Bus()


@pytest.fixture
def tools(bus: Bus) -> dict:
    state = UiState(events=bus)
    return {spec.name: spec for spec in markdown_ui_tools(None, state)}


def call(tools: dict, name: str, **arguments):
    spec = tools[name]
    return spec.handler(AI, spec.args.model_validate(arguments))


def test_the_tool_list_matches_the_seed_with_vex_aliases(tools):
    assert sorted(tools) == sorted(
        [
            "md_ui_get_state",
            "md_ui_set_theme",
            "md_ui_set_typography",
            "md_ui_set_language",
            "md_ui_set_layout",
            "md_ui_show_sidebar_tab",
            "md_ui_open_panel",
            "md_ui_refresh_preview",
            "md_ui_apply_editor_command",
        ]
    )
    for name, spec in tools.items():
        assert TOOL_NAME_PATTERN.match(name)
        short = name.removeprefix("md_")
        assert spec.aliases == (f"vex_{short}", f"vex.{short}")
    assert tools["md_ui_get_state"].read_only


def test_get_state_has_the_seed_fields(tools):
    state = call(tools, "md_ui_get_state")
    for key in (
        "theme",
        "typography",
        "cultureName",
        "isCompactLayout",
        "isSidebarVisible",
        "selectedSidebarTab",
        "isPreviewVisible",
        "isSourceMode",
        "showLineNumbers",
        "isStatusBarVisible",
    ):
        assert key in state


def test_schemas_list_the_allowed_values(tools):
    schema = tools["md_ui_set_theme"].input_schema()
    assert schema["properties"]["themeKey"]["enum"] == list(THEMES)
    assert schema["required"] == ["themeKey"]
    assert tools["md_ui_set_typography"].input_schema()["properties"]["typographyKey"]["enum"] == list(
        TYPOGRAPHIES
    )
    assert tools["md_ui_open_panel"].input_schema()["properties"]["panel"]["enum"] == list(PANELS)
    layout = tools["md_ui_set_layout"].input_schema()["properties"]
    assert set(layout) == {
        "sidebarVisible",
        "statusBarVisible",
        "previewVisible",
        "sourceMode",
        "lineNumbersVisible",
        "compactLayout",
    }


@pytest.mark.parametrize("theme", THEMES)
def test_every_theme_can_be_set_and_is_published(tools, bus, theme):
    result = call(tools, "md_ui_set_theme", themeKey=theme)
    assert result["theme"] == theme
    if theme != "system":  # system is the default: no change, no event
        topic, data = bus.events[-1]
        assert topic == "ui" and data["state"]["theme"] == theme and data["source"] == "mcp:claude"


def test_values_are_matched_without_regard_to_case(tools):
    assert (
        call(tools, "md_ui_set_typography", typographyKey="technologyblue")["typography"] == "TechnologyBlue"
    )
    assert call(tools, "md_ui_set_language", cultureName="ZH-hant")["cultureName"] == "zh-Hant"


@pytest.mark.parametrize(
    ("tool", "arg", "value"),
    [
        ("md_ui_set_theme", "themeKey", "neon"),
        ("md_ui_set_typography", "typographyKey", "Comic"),
        ("md_ui_set_language", "cultureName", "fr-FR"),
        ("md_ui_show_sidebar_tab", "tab", "search"),
        ("md_ui_open_panel", "panel", "website"),
        ("md_ui_apply_editor_command", "command", "paste"),
    ],
)
def test_a_value_outside_the_list_is_refused_with_the_choices(tools, bus, tool, arg, value):
    with pytest.raises(BridgeError) as err:
        call(tools, tool, **{arg: value})
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert value in err.value.message and err.value.data["allowed"]
    assert bus.events == []


def test_set_layout_changes_only_the_switches_passed(tools):
    before = call(tools, "md_ui_get_state")
    after = call(tools, "md_ui_set_layout", previewVisible=False, compactLayout=True)
    assert after["isPreviewVisible"] is False and after["isCompactLayout"] is True
    for key in ("isSidebarVisible", "isSourceMode", "showLineNumbers", "isStatusBarVisible"):
        assert after[key] == before[key]
    assert after["revision"] == before["revision"] + 1


def test_unknown_layout_switches_are_refused_not_ignored(tools):
    with pytest.raises(Exception, match=r"fullScreen|extra"):
        call(tools, "md_ui_set_layout", fullScreen=True)


def test_showing_a_sidebar_tab_also_shows_the_sidebar(tools):
    call(tools, "md_ui_set_layout", sidebarVisible=False)
    state = call(tools, "md_ui_show_sidebar_tab", tab="files")
    assert state["selectedSidebarTab"] == "files" and state["isSidebarVisible"] is True


def test_panels_refresh_and_commands_are_one_shot_events(tools, bus):
    assert call(tools, "md_ui_open_panel", panel="wordcount") == {"opened": "wordCount"}
    call(tools, "md_ui_refresh_preview")
    result = call(tools, "md_ui_apply_editor_command", command="heading2")
    assert result["command"] == "heading2" and result["sent"] is True
    assert [d["kind"] for _, d in bus.events] == ["panel", "refresh", "command"]
    assert call(tools, "md_ui_get_state")["revision"] == 0  # none of them is view state


def test_cut_and_paste_are_not_offered():
    assert "cut" not in EDITOR_COMMANDS and "paste" not in EDITOR_COMMANDS


def test_state_updates_are_validated_before_anything_changes(bus):
    state = UiState(events=bus)
    with pytest.raises(BridgeError):
        state.update({"theme": "dark", "isSourceMode": "yes"})
    assert state.snapshot()["theme"] == "system" and bus.events == []
    with pytest.raises(BridgeError, match="unknown UI state field"):
        state.update({"fontSize": 20})


def test_a_repeated_value_does_not_publish_again(bus):
    state = UiState(events=bus)
    state.set_theme("dark")
    state.set_theme("dark")
    assert len(bus.events) == 1 and state.snapshot()["revision"] == 1


def test_initial_state_is_validated():
    assert UiState(initial={"theme": "Night-Sky"}).snapshot()["theme"] == "night-sky"
    with pytest.raises(BridgeError):
        UiState(initial={"theme": "plaid"})


def test_a_persistent_state_survives_a_restart(tmp_path):
    path = tmp_path / "config" / "markdown-ui.json"
    first = UiState.persistent(path)
    first.update({"theme": "dusk", "cultureName": "ja-JP", "isCompactLayout": True})
    again = UiState.persistent(path).snapshot()
    assert (again["theme"], again["cultureName"], again["isCompactLayout"]) == ("dusk", "ja-JP", True)


def test_a_damaged_or_outdated_state_file_is_ignored_field_by_field(tmp_path):
    path = tmp_path / "markdown-ui.json"
    path.write_text('{"theme": "neon", "typography": "GeekBlack", "fontSize": 3}', encoding="utf-8")
    state = UiState.persistent(path).snapshot()
    assert state["theme"] == "system" and state["typography"] == "GeekBlack"
    path.write_text("{not json", encoding="utf-8")
    assert UiState.persistent(path).snapshot()["theme"] == "system"


def test_panels_and_commands_need_an_open_editor_when_the_platform_can_tell(bus):
    open_tabs = []
    tools = {
        s.name: s for s in markdown_ui_tools(None, UiState(events=bus, editor_open=lambda: bool(open_tabs)))
    }
    for name, args in [
        ("md_ui_open_panel", {"panel": "about"}),
        ("md_ui_refresh_preview", {}),
        ("md_ui_apply_editor_command", {"command": "bold"}),
    ]:
        with pytest.raises(BridgeError) as err:
            call(tools, name, **args)
        assert err.value.code is ErrorCode.UI_NOT_READY and "open the deskbridge editor" in err.value.hint
    assert call(tools, "md_ui_set_theme", themeKey="dark")["theme"] == "dark"  # state needs no editor
    open_tabs.append("tab")
    assert call(tools, "md_ui_open_panel", panel="about") == {"opened": "about"}
