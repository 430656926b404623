"""The audit trail: what it records, what it must never record, and its bounds."""

from __future__ import annotations

import json
import threading

import pytest

from deskbridge.core import limits
from deskbridge.core.audit import Approval, AuditLog
from deskbridge.core.errors import BridgeError, ErrorCode


def test_record_keeps_who_what_outcome_and_approval():
    log = AuditLog()
    rec = log.record(
        caller="mcp:1",
        client="Claude Code",
        tool="pvf_script_apply",
        target="equipment/a.equ",
        outcome="ok",
        approval=Approval.APPROVED,
        duration_ms=12.5,
        arg_names=["planId"],
    )
    assert log.recent() == [rec]
    d = rec.to_dict()
    assert d["caller"] == "mcp:1" and d["client"] == "Claude Code" and d["tool"] == "pvf_script_apply"
    assert d["approval"] == "approved" and d["outcome"] == "ok" and d["duration_ms"] == 12.5
    assert d["args"] == ["planId"] and d["timestamp"] > 0


def test_secret_looking_argument_is_never_recorded(tmp_path):
    secret = "sk-ant-api03-SECRETSECRETSECRET"
    args = {"token": secret, "source": "pvf.log('" + secret + "')", "path": "a.txt"}
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    with log.track(caller="mcp:x", client="c", tool="pvf_script_run", target="a.txt", arg_names=args.keys()):
        pass
    assert secret not in json.dumps([r.to_dict() for r in log.recent()])
    assert secret not in path.read_text()
    assert log.recent()[0].args == ("path", "source", "token")


def test_track_records_the_error_code_and_reraises():
    log = AuditLog()
    with pytest.raises(BridgeError), log.track(caller="ui", client="web", tool="save", target="x"):
        raise BridgeError(ErrorCode.SOURCE_CHANGED, "changed")
    with pytest.raises(ZeroDivisionError), log.track(caller="ui", client="web", tool="save"):
        1 / 0  # noqa: B018
    assert [r.outcome for r in log.recent()] == ["SOURCE_CHANGED", "INTERNAL"]


def test_track_lets_the_operation_set_target_and_approval():
    log = AuditLog()
    with log.track(caller="ui", client="web", tool="apply") as op:
        op.target = "plan script-1"
        op.approval = Approval.DECLINED
    rec = log.recent()[0]
    assert rec.target == "plan script-1" and rec.approval == Approval.DECLINED


def test_memory_keeps_exactly_the_last_limit_records():
    log = AuditLog()
    for i in range(limits.AUDIT_MEMORY_MAX + 1):
        log.record(caller="ui", client="web", tool=f"t{i}")
    assert len(log) == limits.AUDIT_MEMORY_MAX
    assert log.recent()[0].tool == "t1" and log.recent(1)[0].tool == f"t{limits.AUDIT_MEMORY_MAX}"


def test_long_target_is_cut_at_the_limit_and_newlines_removed():
    log = AuditLog()
    at = log.record(caller="ui", client="w", tool="t", target="a" * limits.AUDIT_TARGET_MAX_CHARS)
    past = log.record(caller="ui", client="w", tool="t", target="a" * (limits.AUDIT_TARGET_MAX_CHARS + 1))
    nl = log.record(caller="ui", client="w", tool="t", target="x\ny")
    assert at.target == "a" * limits.AUDIT_TARGET_MAX_CHARS
    assert len(past.target) == limits.AUDIT_TARGET_MAX_CHARS and past.target.endswith("…")
    assert nl.target == "x y"


def test_log_file_lines_stay_whole_under_concurrent_writers(tmp_path):
    path = tmp_path / "audit.jsonl"
    logs = [AuditLog(path) for _ in range(4)]  # separate objects, as separate processes would be

    def work(log, k):
        for i in range(200):
            log.record(caller=f"c{k}", client="x" * 300, tool="t", target=str(i))

    threads = [threading.Thread(target=work, args=(log, k)) for k, log in enumerate(logs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = path.read_text().splitlines()
    assert len(lines) == 800
    assert all(json.loads(line)["tool"] == "t" for line in lines)
