"""Short fuzz runs of the classic parsers (the long ones are `make fuzz`, REL-FUZZ): typed errors only."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deskbridge.core.errors import BridgeError
from deskbridge.fuzz import discover, pvf_classic, run_target


@pytest.mark.parametrize("name", sorted(pvf_classic.TARGETS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=600))
def test_random_bytes_give_only_typed_errors(name, data):
    with contextlib.suppress(BridgeError):
        pvf_classic.TARGETS[name](data)


@pytest.mark.parametrize("name", sorted(pvf_classic.TARGETS))
def test_mutated_seeds_give_no_findings(name, tmp_path):
    res = run_target(
        f"pvf_classic.{name}", pvf_classic.TARGETS[name], pvf_classic.SEEDS[name], 400, findings_dir=tmp_path
    )
    assert res.inputs == 400 and res.findings == []


def test_runner_reports_a_crash_as_a_finding(tmp_path):
    def broken(data: bytes) -> None:
        if data[:1] == b"x":
            raise IndexError("boom")

    res = run_target("demo.broken", broken, [b"x"], 5, findings_dir=tmp_path)
    assert res.findings and "IndexError" in res.findings[0]
    assert list(tmp_path.glob("demo.broken-*.bin"))


def test_registry_finds_the_classic_targets():
    targets, _seeds = discover()
    assert {f"pvf_classic.{n}" for n in pvf_classic.TARGETS} <= set(targets)
