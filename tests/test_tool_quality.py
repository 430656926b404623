"""Tools a model uses well, for every kind (AGENT-TOKENS): error hints that name the next tool, a tools/list that
fits 5 k o200k tokens, every argument described with its real default, annotations true to behaviour.

Calls go through the SDK's in-memory client into the same MCP server `serve` and `deskbridge mcp` build.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from deskbridge.app import App
from deskbridge.mcp.server import build_mcp_server

pytestmark = pytest.mark.anyio

TOKEN_BUDGET = 5000
"""TARGETS.md AGENT-TOKENS: tools/list per kind, o200k tokens."""
HINT_SHARE = 0.9
"""TARGETS.md AGENT-TOKENS: the share of error hints that name the tool to call next."""

_SAGE = importlib.util.spec_from_file_location(
    "sage_fixtures", Path(__file__).parent / "kinds/sage/conftest.py"
)
sage_fixtures = importlib.util.module_from_spec(_SAGE)  # type: ignore[arg-type]
sys.modules["sage_fixtures"] = sage_fixtures  # its dataclasses look their module up
_SAGE.loader.exec_module(sage_fixtures)  # type: ignore[union-attr]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_probe(tmp: Path) -> tuple[Path, str | None, dict[str, Any]]:
    (tmp / "a.txt").write_text("probe", "utf-8")
    return tmp, "probe", {}


def make_markdown(tmp: Path) -> tuple[Path, str | None, dict[str, Any]]:
    (tmp / "README.md").write_text("# Notes\n\n## Intro\n\nHello world.\n", "utf-8")
    return tmp, None, {}


def make_sage(tmp: Path) -> tuple[Path, str | None, dict[str, Any]]:
    sdk, mod = tmp / "sdk", tmp / "Mods" / "Tiny"
    files = {
        sdk / "Schemas/xsd/CnC3Types.xsd": sage_fixtures.XSD,
        sdk / "Schemas/xsd/Includes/Ref.xsd": sage_fixtures.REF_XSD,
        sdk / "SageXml/Static.xml": sage_fixtures.doc('<GameObject id="BaseUnit"/>'),
        mod / "Data/Mod.xml": sage_fixtures.doc("", '<Include type="all" source="Units.xml"/>'),
        mod / "Data/Units.xml": sage_fixtures.doc(
            '<GameObject id="Tank" inheritFrom="BaseUnit"/>\n<WeaponTemplate id="TankGun"/>'
        ),
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    return mod, None, {"sdk": str(sdk)}


def make_pvf(tmp: Path) -> tuple[Path, str | None, dict[str, Any]]:
    from deskbridge.kinds.pvf.synth import synth

    path = tmp / "Script.pvf"
    synth(path, family="classic", files=40, seed=1)
    return path, "pvf", {}


KINDS = {"probe": make_probe, "markdown": make_markdown, "sage": make_sage, "pvf": make_pvf}

OWED: dict[str, str] = {}
"""Kinds (or `kind:check`) whose expectations are their own owners' to meet: a failure there is reported as
xfail, not hidden."""


def owed(kind: str, failure: AssertionError, check: str = "") -> None:
    why = OWED.get(kind) or OWED.get(f"{kind}:{check}")
    if why:
        pytest.xfail(f"{kind}: {why} ({str(failure).splitlines()[0][:200]})")
    raise failure


async def opened(kind: str, tmp: Path) -> App:
    path, forced, options = KINDS[kind](tmp)
    app = App.create()
    try:
        app.open(path, kind=forced, options=options)
    except Exception as exc:  # the pvf kind's workspace may not exist in this build yet
        if kind == "pvf":
            pytest.skip(f"no pvf workspace in this build: {exc}")
        raise
    await app.start()
    if kind == "sage":
        with anyio.fail_after(60):
            while app.workspace.status().get("state") not in ("ready", "ready_xml"):  # type: ignore[union-attr]
                await anyio.sleep(0.05)
    return app


async def connected(app: App, *, editor: bool = True) -> AsyncIterator[Any]:
    async with Client(build_mcp_server(app, editor=editor)) as client:
        yield client


def wrong_inputs(tool: Any) -> list[dict[str, Any]]:
    """What a model gets wrong most: an argument the tool does not take, and plausible values that name
    nothing (an id, a path, a revision that does not exist)."""

    def guess(prop: dict[str, Any]) -> Any:
        if "enum" in prop:
            return prop["enum"][0]
        kind = prop.get("type")
        kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
        return {
            "integer": 999999,
            "number": 999999,
            "boolean": True,
            "array": ["missing-1"],
            "object": {},
        }.get(kind or "string", "missing-1")

    schema = tool.input_schema
    props = schema.get("properties", {})
    required = {k: guess(props[k]) for k in schema.get("required", [])}
    everything = {k: guess(v) for k, v in props.items()}
    return [{"unknownArgument": 1}, required, everything]


@pytest.mark.parametrize("kind", list(KINDS))
async def test_error_hints_name_a_real_next_tool(kind: str, tmp_path: Path) -> None:
    app = await opened(kind, tmp_path)
    try:
        async for client in connected(app):
            tools = (await client.list_tools()).tools
            names = {t.name for t in tools}
            prefixes = [t.name.split("_")[0] + "_" for t in tools]
            prefix = max(set(prefixes), key=prefixes.count)
            errors: list[tuple[str, str, str]] = []
            for tool in tools:
                if (tool.description or "").startswith("Conformance fixture"):
                    continue  # the suite's own shapes (they ask the client for input), not the kind's tools
                for args in wrong_inputs(tool):
                    with anyio.fail_after(30):
                        result = await client.call_tool(tool.name, args)
                    if result.is_error:
                        body = result.structured_content
                        errors.append((tool.name, body["code"], body["hint"]))
    finally:
        await app.stop()
    try:
        check_hints(errors, names, prefix)
    except AssertionError as failure:
        owed(kind, failure)


def check_hints(errors: list[tuple[str, str, str]], names: set[str], prefix: str) -> None:
    assert errors, "no wrong input was refused"
    invented = [
        (tool, name)
        for tool, _code, hint in errors
        for name in re.findall(rf"\b{prefix}[a-z0-9_]+\b", hint)
        if name not in names
    ]
    assert not invented, f"hints name tools that do not exist: {invented}"
    naming = [e for e in errors if any(n in e[2] for n in names)]
    share = len(naming) / len(errors)
    missing = [e for e in errors if e not in naming]
    assert share >= HINT_SHARE, (
        f"{share:.0%} of {len(errors)} hints name a next tool; these do not: {missing}"
    )


async def test_over_stdio_no_hint_points_at_a_web_ui(tmp_path: Path) -> None:
    app = await opened("markdown", tmp_path)
    app.update_settings({"require_approval": True})
    try:
        async for client in connected(app, editor=False):
            tools = (await client.list_tools()).tools
            assert not [t.name for t in tools if t.name.startswith("md_ui_")]
            doc = (await client.call_tool("md_get_current_document", {})).structured_content
            # an approval with no browser and a client without elicitation: nobody could be asked
            refused = await client.call_tool(
                "md_replace_current_document", {"markdown": "# New\n", "expectedRevision": doc["revision"]}
            )
    finally:
        await app.stop()
    body = refused.structured_content
    assert refused.is_error and body["code"] == "APPROVAL_DECLINED"
    assert "the person declined" not in body["message"]  # nobody was asked, so nobody declined
    assert "deskbridge serve" in body["hint"] and "md_replace_current_document" in body["hint"]


async def test_a_client_that_fails_the_elicitation_is_not_reported_as_a_decline(tmp_path: Path) -> None:
    import mcp_types as types

    app = await opened("markdown", tmp_path)
    app.update_settings({"require_approval": True})

    async def broken(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise RuntimeError("no dialog available")

    try:
        async with Client(build_mcp_server(app), mode="legacy", elicitation_callback=broken) as client:
            doc = (await client.call_tool("md_get_current_document", {})).structured_content
            refused = await client.call_tool(
                "md_replace_current_document", {"markdown": "# New\n", "expectedRevision": doc["revision"]}
            )
    finally:
        await app.stop()
    assert refused.is_error and refused.structured_content["code"] == "APPROVAL_DECLINED"
    assert "declined" not in refused.structured_content["message"]
    assert refused.structured_content["data"]["decision"] != "declined"


def o200k() -> Any:
    bpe = pytest.importorskip("bpe_openai", reason="the test extra brings bpe-openai (o200k, offline)")
    return bpe.get_encoding("o200k_base")


@pytest.mark.parametrize("kind", list(KINDS))
async def test_tools_list_fits_the_token_budget(kind: str, tmp_path: Path) -> None:
    encoding = o200k()
    app = await opened(kind, tmp_path)
    try:
        async for client in connected(app):
            tools = (await client.list_tools()).tools
    finally:
        await app.stop()
    wire = json.dumps(
        {"tools": [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]},
        ensure_ascii=False,
        separators=(",", ":"),
    )
    tokens = len(encoding.encode(wire))
    if tokens > TOKEN_BUDGET:
        owed(
            kind,
            AssertionError(f"{kind}: tools/list is {tokens} o200k tokens (budget {TOKEN_BUDGET})"),
            "tokens",
        )
    assert '"title":"' not in json.dumps([t.input_schema for t in tools]).replace(" ", "") or any(
        '"title"' in json.dumps(t.input_schema.get("properties", {})) for t in tools
    )


def _properties(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    defs = schema.get("$defs", {})
    out = {}
    for name, prop in schema.get("properties", {}).items():
        if "$ref" in prop and "description" not in prop:
            prop = {**defs.get(prop["$ref"].rsplit("/", 1)[-1], {}), **prop}
        out[name] = prop
    return out


@pytest.mark.parametrize("kind", list(KINDS))
async def test_every_argument_is_described_and_defaults_match_the_text(kind: str, tmp_path: Path) -> None:
    app = await opened(kind, tmp_path)
    try:
        async for client in connected(app):
            tools = (await client.list_tools()).tools
    finally:
        await app.stop()
    undescribed, wrong_default, titles = [], [], []
    for tool in tools:
        if (tool.description or "").startswith("Conformance fixture"):
            continue  # schemas given verbatim by the conformance suite
        for name, prop in _properties(tool.input_schema).items():
            if "title" in prop:
                titles.append(f"{tool.name}.{name}")
            text = prop.get("description", "")
            if not text:
                undescribed.append(f"{tool.name}.{name}")
                continue
            said = re.search(r"\(default:? (-?\d+(?:\.\d+)?|true|false)\b", text)
            documented = json.loads(said.group(1)) if said else None
            if said and prop.get("default") is not None and documented != prop["default"]:
                wrong_default.append(f"{tool.name}.{name}: says {said.group(1)}, schema {prop['default']}")
    try:
        assert not titles, f"pydantic titles left in: {titles}"
        assert not undescribed, f"arguments without a description: {undescribed}"
        assert not wrong_default, f"documented defaults that the schema contradicts: {wrong_default}"
    except AssertionError as failure:
        owed(kind, failure)


async def test_annotations_say_what_the_tools_do(tmp_path: Path) -> None:
    app = await opened("markdown", tmp_path)
    try:
        async for client in connected(app):
            tools = {t.name: t for t in (await client.list_tools()).tools}
    finally:
        await app.stop()
    # An absent hint means the spec's default (MCP spec, ToolAnnotations: readOnlyHint false, destructiveHint
    # true, idempotentHint false, openWorldHint true), which the server leaves out to save tokens.
    for name in ("md_save_current_document", "md_save_current_document_as", "md_ui_apply_editor_command"):
        assert effective(tools[name].annotations)["destructive"] is True, name
    for tool in tools.values():
        hints = effective(tool.annotations)
        assert hints["openWorld"] is False, tool.name
        assert tool.annotations.open_world_hint is False  # the one non-default every tool of ours sends
    assert effective(tools["md_get_current_document"].annotations)["readOnly"] is True
    assert effective(tools["md_replace_current_document"].annotations)["readOnly"] is False


def effective(hints: Any) -> dict[str, bool]:
    """The annotations a client acts on: the given ones, the spec's defaults for the rest."""
    got = hints.model_dump(exclude_none=True) if hints is not None else {}
    return {
        "readOnly": got.get("read_only_hint", False),
        "destructive": got.get("destructive_hint", True),
        "idempotent": got.get("idempotent_hint", False),
        "openWorld": got.get("open_world_hint", True),
    }


async def test_listed_annotations_leave_out_the_spec_defaults_and_titles_that_repeat_the_name(
    tmp_path: Path,
) -> None:
    app = await opened("pvf", tmp_path)
    try:
        async for client in connected(app):
            tools = {t.name: t for t in (await client.list_tools()).tools}
    finally:
        await app.stop()
    for tool in tools.values():
        given = tool.annotations.model_dump(exclude_none=True)
        assert given.get("read_only_hint") is not False, tool.name  # false is the default
        assert given.get("destructive_hint") is not True, tool.name  # true is the default
        assert given.get("idempotent_hint") is not False, tool.name
        spec = app.find_tool(tool.name)
        hints = effective(tool.annotations)
        assert hints["readOnly"] is spec.read_only and hints["openWorld"] is False, tool.name
        if not spec.read_only:  # destructive / idempotent mean nothing for a read-only tool (spec)
            assert (hints["destructive"], hints["idempotent"]) == (spec.destructive, spec.idempotent), (
                tool.name
            )
    # a title that only repeats the name is left out; one that says more stays
    assert tools["pvf_archive_save"].title is None and tools["pvf_workspace_info"].title is None
    assert tools["pvf_archive_save_as"].title == "Save a copy"
