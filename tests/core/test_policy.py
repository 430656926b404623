"""Access scopes, approval rules and the approval broker (UI answer, elicitation, timeout, nobody)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from deskbridge.core import limits
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.events import EventBus
from deskbridge.core.policy import (
    AccessScope,
    ApprovalBroker,
    ApprovalRequest,
    ApprovalRules,
    Decision,
    approval_rules_from,
    ask_for_tool,
)


def req(**kw) -> ApprovalRequest:
    base = dict(
        caller="mcp:1", client="Claude Code", tool="md_replace", target="doc.md", summary="replace 2 lines"
    )
    base.update(kw)
    return ApprovalRequest(**base)


# -- scopes ---------------------------------------------------------------------------------------------


def test_document_scope_allows_only_the_document(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("x")
    (tmp_path / "other.md").write_text("y")
    scope = AccessScope.document(doc)
    assert scope.resolve(str(doc)) == doc.resolve()
    assert scope.resolve("doc.md") == doc.resolve()
    with pytest.raises(BridgeError) as ei:
        scope.resolve("other.md")
    assert ei.value.code == ErrorCode.ACCESS_DENIED


def test_folder_scope_allows_everything_below_and_nothing_beside(tmp_path):
    (tmp_path / "proj" / "a").mkdir(parents=True)
    (tmp_path / "proj_evil").mkdir()
    scope = AccessScope.folder(tmp_path / "proj")
    assert scope.resolve("a/new.xml").name == "new.xml"
    with pytest.raises(BridgeError):
        scope.resolve(str(tmp_path / "proj_evil" / "x"))


def test_custom_scope_with_several_roots(tmp_path):
    (tmp_path / "mod").mkdir()
    (tmp_path / "sdk").mkdir()
    scope = AccessScope.custom([tmp_path / "mod", tmp_path / "sdk"])
    assert scope.resolve(str(tmp_path / "sdk" / "x.xsd")).parent == (tmp_path / "sdk").resolve()
    assert scope.to_dict()["kind"] == "custom"


def test_empty_custom_scope_allows_nothing(tmp_path):
    with pytest.raises(BridgeError) as ei:
        AccessScope.custom([]).resolve(str(tmp_path))
    assert ei.value.code == ErrorCode.ACCESS_DENIED


# -- rules ----------------------------------------------------------------------------------------------


def test_rules_lookup_order_switch_override_default_fallback():
    rules = ApprovalRules(defaults={"md_replace": True, "md_read": False}, overrides={"md_replace": False})
    assert rules.requires_approval("md_replace") is False  # settings override the kind's default
    assert rules.requires_approval("md_read") is False
    assert rules.requires_approval("md_delete") is True  # unlisted write: fail safe
    assert rules.requires_approval("md_outline", read_only=True) is False
    rules.enabled = False
    assert rules.requires_approval("md_delete") is False


def test_rules_from_settings():
    rules = approval_rules_from(
        {"save": True}, {"enabled": True, "overrides": {"save": False}}, read_only_ops=["read"]
    )
    assert not rules.requires_approval("save") and not rules.requires_approval("read")
    assert not approval_rules_from({"save": True}, {"enabled": False}).requires_approval("save")


# -- broker ---------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_ui_approves_through_the_event_bus():
    bus = EventBus()
    broker = ApprovalBroker(bus, timeout_s=5)
    broker.attach_ui()
    async with bus.subscribe("approval") as sub:
        pending = asyncio.create_task(broker.request(req(diff="-a\n+b\n")))
        ev = await sub.get(2)
        assert ev.data["event"] == "requested"
        shown = ev.data["request"]
        assert shown["tool"] == "md_replace" and shown["diff"] == "-a\n+b\n"
        assert [r.id for r in broker.pending()] == [shown["id"]]
        broker.answer(shown["id"], True)
        result = await pending
        assert result.approved and result.by == "ui"
        resolved = await sub.get(2)
        assert resolved.data == {"event": "resolved", "id": shown["id"], "decision": "approved"}
    assert broker.pending() == []


@pytest.mark.anyio
async def test_ui_decline_makes_require_raise_approval_declined():
    bus = EventBus()
    broker = ApprovalBroker(bus, timeout_s=5)
    broker.attach_ui()
    async with bus.subscribe("approval") as sub:
        pending = asyncio.create_task(broker.require(req()))
        ev = await sub.get(2)
        broker.answer(ev.data["request"]["id"], False)
        with pytest.raises(BridgeError) as ei:
            await pending
    assert ei.value.code == ErrorCode.APPROVAL_DECLINED and ei.value.data["decision"] == "declined"


@pytest.mark.anyio
async def test_answer_from_another_thread_is_delivered():
    bus = EventBus()
    broker = ApprovalBroker(bus, timeout_s=5)
    broker.attach_ui()
    async with bus.subscribe("approval") as sub:
        pending = asyncio.create_task(broker.request(req()))
        rid = (await sub.get(2)).data["request"]["id"]
        t = threading.Thread(target=broker.answer, args=(rid, True))
        t.start()
        t.join()
        assert (await asyncio.wait_for(pending, 2)).approved


@pytest.mark.anyio
async def test_unanswered_request_times_out_as_declined_and_late_answer_is_not_found():
    broker = ApprovalBroker(EventBus(), timeout_s=0.05)
    broker.attach_ui()
    with pytest.raises(BridgeError) as ei:
        await broker.require(req())
    assert ei.value.code == ErrorCode.APPROVAL_DECLINED and ei.value.data["decision"] == "timed_out"
    with pytest.raises(BridgeError) as e2:
        broker.answer(ei.value.data["approvalId"], True)
    assert e2.value.code == ErrorCode.NOT_FOUND
    assert broker.pending() == []


@pytest.mark.anyio
@pytest.mark.security
async def test_the_clients_question_shows_the_real_diff_not_only_the_agents_reason():
    """The summary is the agent's own `reason`; the person answering in the client must see what changes."""
    broker = ApprovalBroker(EventBus())
    asked: list[str] = []

    async def elicit(question: str) -> bool | None:
        asked.append(question)
        return False

    diff = "--- doc.md\n+++ doc.md\n@@ -1 +1 @@\n-keep me\n+rm -rf everything\n"
    await broker.request(req(summary="fix a typo", diff=diff), elicit=elicit)
    assert "fix a typo" in asked[0] and "-keep me\n+rm -rf everything" in asked[0]
    # A long diff is cut at a line end, and the question says where to see it whole.
    long = "".join(f"+line {i}\n" for i in range(5000))
    await broker.request(req(diff=long), elicit=elicit)
    assert len(asked[1]) < limits.APPROVAL_ELICIT_DIFF_MAX_CHARS + 500
    assert "+line 0\n" in asked[1] and "+line 4999" not in asked[1] and "deskbridge open" in asked[1]
    shown = asked[1].split("\n\n", 1)[1].splitlines()[:-1]
    assert all(line.startswith("+line ") and line[6:].isdigit() for line in shown)


@pytest.mark.anyio
async def test_without_ui_the_elicit_callback_asks():
    broker = ApprovalBroker(EventBus())
    asked = []

    async def elicit(question: str) -> bool | None:
        asked.append(question)
        return True

    result = await broker.request(req(), elicit=elicit)
    assert result.approved and result.by == "elicit" and result.for_audit == "approved"
    assert "md_replace" in asked[0] and "doc.md" in asked[0]

    async def cancel(question: str) -> bool | None:
        return None

    declined = await broker.request(req(), elicit=cancel)
    assert declined.decision is Decision.DECLINED and declined.for_audit == "declined"


@pytest.mark.anyio
async def test_a_tools_declared_operation_asks_only_when_the_rules_say_so():
    broker = ApprovalBroker(EventBus())
    built: list[str] = []

    def build() -> ApprovalRequest:
        built.append("x")
        return req(tool="pvf_plan_apply")

    async def yes(question: str) -> bool | None:
        return True

    async def no(question: str) -> bool | None:
        return False

    common = dict(defaults={"edit": True, "save": False}, request=build)
    assert (
        ask_for_tool(broker, operation="save", require_approval=True, overrides={}, elicit=yes, **common)
        is None
    )
    assert (
        ask_for_tool(broker, operation="edit", require_approval=False, overrides={}, elicit=yes, **common)
        is None
    )
    assert (
        ask_for_tool(
            broker, operation="edit", require_approval=True, overrides={"edit": False}, elicit=yes, **common
        )
        is None
    )
    assert not built  # the question is only built when one is asked
    result = await ask_for_tool(
        broker, operation="save", require_approval=True, overrides={"save": True}, elicit=yes, **common
    )  # type: ignore[misc]
    assert result.approved and built == ["x"]
    with pytest.raises(BridgeError) as err:
        await ask_for_tool(broker, operation="edit", require_approval=True, overrides={}, elicit=no, **common)  # type: ignore[misc]
    assert err.value.code == ErrorCode.APPROVAL_DECLINED
    # an operation nobody listed fails safe: it asks
    with pytest.raises(BridgeError):
        await ask_for_tool(
            broker, operation="unlisted", require_approval=True, overrides={}, elicit=no, **common
        )  # type: ignore[misc]


def test_the_audit_tells_a_timeout_and_nobody_to_ask_from_a_no():
    from deskbridge.core.policy import ApprovalResult

    assert ApprovalResult(Decision.TIMED_OUT, "timeout").for_audit == "timed_out"
    assert ApprovalResult(Decision.NO_ONE_TO_ASK, "none").for_audit == "no_one_to_ask"
    assert ApprovalResult(Decision.DECLINED, "ui").for_audit == "declined"


@pytest.mark.anyio
async def test_ui_is_preferred_over_elicit_when_attached():
    bus = EventBus()
    broker = ApprovalBroker(bus, timeout_s=5)
    broker.attach_ui()

    async def elicit(q):
        raise AssertionError("must not elicit while a UI is attached")

    async with bus.subscribe("approval") as sub:
        t = asyncio.create_task(broker.request(req(), elicit=elicit))
        broker.answer((await sub.get(2)).data["request"]["id"], True)
        assert (await t).by == "ui"


@pytest.mark.anyio
async def test_nobody_to_ask_is_declined_never_approved():
    broker = ApprovalBroker(EventBus())
    broker.attach_ui()
    broker.detach_ui()
    with pytest.raises(BridgeError) as ei:
        await broker.require(req())
    assert ei.value.code == ErrorCode.APPROVAL_DECLINED and "web UI" in ei.value.hint


@pytest.mark.anyio
async def test_long_diff_is_cut_at_the_limit():
    bus = EventBus()
    broker = ApprovalBroker(bus, timeout_s=5)
    broker.attach_ui()
    cap = limits.APPROVAL_DIFF_MAX_BYTES
    async with bus.subscribe("approval") as sub:
        for diff, truncated in (("x" * cap, False), ("x" * (cap + 1), True)):
            t = asyncio.create_task(broker.request(req(diff=diff)))
            shown = (await sub.get(2)).data["request"]
            assert shown["diffTruncated"] is truncated
            assert (shown["diff"] == diff) is (not truncated)
            broker.answer(shown["id"], False)
            await t
            await sub.get(2)


@pytest.mark.anyio
async def test_pending_requests_are_capped(monkeypatch):
    monkeypatch.setattr(limits, "APPROVAL_PENDING_MAX", 2)
    broker = ApprovalBroker(EventBus(), timeout_s=5)
    broker.attach_ui()
    waiting = [asyncio.create_task(broker.request(req())) for _ in range(2)]
    await asyncio.sleep(0.01)
    assert len(broker.pending()) == 2
    with pytest.raises(BridgeError) as ei:
        await broker.request(req())
    assert ei.value.code == ErrorCode.LIMIT_EXCEEDED
    for r in broker.pending():
        broker.answer(r.id, False)
    results = await asyncio.gather(*waiting)
    assert [r.decision for r in results] == [Decision.DECLINED, Decision.DECLINED]


# -- which path approves (issue 8: approvals_via_client) -------------------------------------------------


@pytest.mark.security
def test_client_elicitation_is_not_used_when_the_person_requires_the_browser():
    allowed = [True]
    broker = ApprovalBroker(EventBus(), client_allowed=lambda: allowed[0])
    asked: list[str] = []

    async def elicit(question: str) -> bool:
        asked.append(question)
        return True  # a scripted client approving itself

    async def run():
        first = await broker.request(req(), elicit=elicit)
        allowed[0] = False
        with pytest.raises(BridgeError) as ei:
            await broker.require(req(), elicit=elicit)
        return first, ei.value

    first, refused = asyncio.run(run())
    assert (
        first.approved
        and str(first.via) == "client"
        and first.to_dict() == {"decision": "approved", "via": "client"}
    )
    assert len(asked) == 1, "the client was asked although approvals need the browser"
    assert refused.code == ErrorCode.APPROVAL_DECLINED and "browser" in refused.hint
    assert refused.data["decision"] == "no_one_to_ask" and refused.data["via"] is None


def test_a_browser_answer_says_it_came_from_the_browser():
    bus = EventBus()
    broker = ApprovalBroker(bus)
    broker.attach_ui()

    async def run():
        sub = bus.subscribe()
        task = asyncio.ensure_future(broker.request(req()))
        shown = (await sub.__anext__()).data["request"]
        broker.answer(shown["id"], True)
        return await task

    result = asyncio.run(run())
    assert result.approved and str(result.via) == "browser"
