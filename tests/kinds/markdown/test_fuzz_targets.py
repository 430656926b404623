"""The markdown fuzz targets run on hypothesis bytes: only typed errors, never a crash (REL-FUZZ, small dose)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deskbridge.core.errors import BridgeError
from deskbridge.fuzz.markdown import SEEDS, TARGETS


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_fuzz_target_survives_random_bytes(name):
    target = TARGETS[name]
    for seed in SEEDS.get(name, []):
        with contextlib.suppress(BridgeError):
            target(seed)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.binary(max_size=400))
    def run(data):
        with contextlib.suppress(BridgeError):
            target(data)

    run()
