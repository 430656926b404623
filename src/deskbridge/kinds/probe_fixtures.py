"""The conformance suite's fixture tools, served by the probe kind, built on the same transport paths as the real
tools: live elicitation, 2026-07-28 input-required rounds with a sealed `requestState`, a hand-written JSON
Schema 2020-12 input schema, an SSE stream closed mid-call, and arguments mirrored into `Mcp-Param-*` headers.

Names and shapes are the suite's (`@modelcontextprotocol/conformance`, scenario descriptions). deskbridge's own
tools never sample or list roots; those requests appear here only because the MRTR scenarios exercise them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import Field

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.tools import (
    AnyArgs,
    CallContext,
    InputRequired,
    MissingClientCapability,
    NoArgs,
    ToolArgs,
    ToolSpec,
)


def _elicit(message: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": {"type": "object", "properties": properties, "required": required},
        },
    }


SAMPLE_CAPITAL = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
        "maxTokens": 100,
    },
}
LIST_ROOTS = {"method": "roots/list", "params": {}}
ASK_NAME = _elicit("What is your name?", {"name": {"type": "string"}}, ["name"])

DEFAULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    },
}
ENUMS_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
CUSTOM_HEADERS_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {
            "type": "string",
            "description": "Mirrored into Mcp-Param-Region.",
            "x-mcp-header": "Region",
        },
        "query": {"type": "string", "description": "Not mirrored."},
    },
    "required": ["region"],
}


class ElicitationArgs(ToolArgs):
    message: str = Field(description="The message to show the person.")


def _has(ctx: CallContext, capability: str) -> bool:
    return ctx.client_capabilities.get(capability) is not None


async def _form(ctx: CallContext, key: str, message: str, schema: dict[str, Any]) -> dict[str, Any]:
    """One form answer: live on handshake-era sessions, by an input-required round on 2026-07-28."""
    if ctx.ask is not None:
        return await ctx.ask(message, schema)
    answer = (ctx.input_responses or {}).get(key)
    if isinstance(answer, dict):
        return answer
    if not _has(ctx, "elicitation"):
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, "this client does not support elicitation")
    raise InputRequired(
        requests={
            key: {"method": "elicitation/create", "params": {"message": message, "requestedSchema": schema}}
        }
    )


def _described(answer: dict[str, Any]) -> str:
    return f"action={answer.get('action')}, content={json.dumps(answer.get('content'), ensure_ascii=False)}"


async def elicitation(ctx: CallContext, args: ElicitationArgs) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    answer = await _form(ctx, "user_info", args.message, schema)
    return {"text": f"User response: {_described(answer)}"}


async def elicitation_defaults(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
    answer = await _form(
        ctx, "defaults", "Please review and update the form fields with defaults", DEFAULTS_SCHEMA
    )
    return {"text": f"Elicitation completed: {_described(answer)}"}


async def elicitation_enums(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
    answer = await _form(ctx, "enums", "Please select options from the enum fields", ENUMS_SCHEMA)
    return {"text": f"Elicitation completed: {_described(answer)}"}


def _pending(ctx: CallContext, wanted: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    answers = ctx.input_responses or {}
    return {key: req for key, req in wanted.items() if not isinstance(answers.get(key), dict)}


async def mrtr_elicitation(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
    missing = _pending(ctx, {"user_name": ASK_NAME})
    if missing:  # also when a retry brought the wrong keys: ask again, not an error
        raise InputRequired(requests=missing)
    name = (ctx.input_responses or {})["user_name"].get("content", {}).get("name")
    return {"text": f"Hello, {name}!"}


async def mrtr_sampling(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
    missing = _pending(ctx, {"capital_question": SAMPLE_CAPITAL})
    if missing:
        raise InputRequired(requests=missing)
    content = (ctx.input_responses or {})["capital_question"].get("content", {})
    text = content.get("text") if isinstance(content, dict) else str(content)
    return {"text": f"The model answered: {text}"}


async def mrtr_roots(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
    missing = _pending(ctx, {"client_roots": LIST_ROOTS})
    if missing:
        raise InputRequired(requests=missing)
    roots = (ctx.input_responses or {})["client_roots"].get("roots", [])
    return {"text": f"The client has {len(roots)} root(s): {', '.join(str(r.get('uri')) for r in roots)}"}


async def mrtr_request_state(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
    confirm = _elicit("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])
    if _pending(ctx, {"confirm": confirm}) or ctx.request_state != "round-1":
        raise InputRequired(requests={"confirm": confirm}, state="round-1")
    return {"text": "state-ok: the requestState came back intact"}


async def mrtr_multiple(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
    greeting = {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Generate a greeting"}}],
            "maxTokens": 50,
        },
    }
    wanted = {"user_name": ASK_NAME, "greeting": greeting, "client_roots": LIST_ROOTS}
    if _pending(ctx, wanted) or ctx.request_state != "multiple":
        raise InputRequired(requests=wanted, state="multiple")
    return {"text": "Received all three answers: user_name, greeting, client_roots"}


async def mrtr_multi_round(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
    step1 = _elicit("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])
    step2 = _elicit("Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"])
    answers = ctx.input_responses or {}
    if ctx.request_state == "round-2" and isinstance(answers.get("step2"), dict):
        return {"text": f"Done after three rounds: color {answers['step2'].get('content', {}).get('color')}"}
    if ctx.request_state in ("round-1", "round-2") and (
        ctx.request_state == "round-2" or isinstance(answers.get("step1"), dict)
    ):
        raise InputRequired(requests={"step2": step2}, state="round-2")
    raise InputRequired(requests={"step1": step1}, state="round-1")


async def mrtr_tampered(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
    # The sealing is the transport's: a tampered requestState never reaches this handler (-32602).
    confirm = _elicit("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])
    if _pending(ctx, {"confirm": confirm}) or ctx.request_state != "untampered":
        raise InputRequired(requests={"confirm": confirm}, state="untampered")
    return {"text": "state-ok"}


async def mrtr_capabilities(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
    offered = {
        "elicitation": ("user_name", ASK_NAME),
        "sampling": ("capital_question", SAMPLE_CAPITAL),
        "roots": ("client_roots", LIST_ROOTS),
    }
    wanted = {key: req for cap, (key, req) in offered.items() if _has(ctx, cap)}
    missing = _pending(ctx, wanted)
    if missing:
        raise InputRequired(requests=missing)
    return {"text": f"Asked only for what the client can answer: {', '.join(wanted) or 'nothing'}"}


async def missing_capability(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
    if not _has(ctx, "sampling"):
        raise MissingClientCapability("sampling")
    return {"text": "the client declared sampling"}


async def reconnection(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
    if ctx.close_stream is not None:
        await (
            ctx.close_stream()
        )  # the client reconnects with Last-Event-ID and gets the result from the store
        await asyncio.sleep(0.2)
    return {"text": "Reconnection test completed"}


async def json_schema(ctx: CallContext, args: AnyArgs) -> dict[str, Any]:
    return {"text": "received", "arguments": args.model_dump()}


async def custom_headers(ctx: CallContext, args: AnyArgs) -> dict[str, Any]:
    return {"text": f"region {args.model_dump().get('region')!r} matched its Mcp-Param-Region header"}


def fixture_tools() -> list[ToolSpec]:
    def fixture(name: str, description: str, args: type[ToolArgs], handler: Any, **extra: Any) -> ToolSpec:
        return ToolSpec(
            name, name, f"Conformance fixture: {description}", args, handler, read_only=True, **extra
        )

    return [
        fixture(
            "test_elicitation", "asks the person for a username and email.", ElicitationArgs, elicitation
        ),
        fixture(
            "test_elicitation_sep1034_defaults",
            "a form with defaults (SEP-1034).",
            NoArgs,
            elicitation_defaults,
        ),
        fixture(
            "test_elicitation_sep1330_enums",
            "a form with the five enum kinds (SEP-1330).",
            NoArgs,
            elicitation_enums,
        ),
        fixture(
            "test_input_required_result_elicitation",
            "one input-required round (name).",
            NoArgs,
            mrtr_elicitation,
        ),
        fixture(
            "test_input_required_result_sampling", "one input-required sampling round.", NoArgs, mrtr_sampling
        ),
        fixture(
            "test_input_required_result_list_roots",
            "one input-required roots/list round.",
            NoArgs,
            mrtr_roots,
        ),
        fixture(
            "test_input_required_result_request_state", "requestState round trip.", NoArgs, mrtr_request_state
        ),
        fixture(
            "test_input_required_result_multiple_inputs",
            "three input requests at once.",
            NoArgs,
            mrtr_multiple,
        ),
        fixture(
            "test_input_required_result_multi_round",
            "three rounds, evolving state.",
            NoArgs,
            mrtr_multi_round,
        ),
        fixture("test_input_required_result_tampered_state", "a sealed requestState.", NoArgs, mrtr_tampered),
        fixture(
            "test_input_required_result_capabilities",
            "asks only what the client declared.",
            NoArgs,
            mrtr_capabilities,
        ),
        fixture("test_missing_capability", "needs the sampling capability.", NoArgs, missing_capability),
        fixture("test_reconnection", "closes its SSE stream mid-call (SEP-1699).", NoArgs, reconnection),
        fixture(
            "json_schema_2020_12_tool",
            "a JSON Schema 2020-12 input schema.",
            AnyArgs,
            json_schema,
            schema=JSON_SCHEMA_2020_12,
        ),
        fixture(
            "test_custom_headers",
            "an argument mirrored into a header (SEP-2243).",
            AnyArgs,
            custom_headers,
            schema=CUSTOM_HEADERS_SCHEMA,
        ),
    ]
