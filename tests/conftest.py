"""Suite-wide fixtures: every test gets its own deskbridge home, so no test touches the user's real settings."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(autouse=True)
def deskbridge_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("deskbridge-home")
    monkeypatch.setenv("DESKBRIDGE_HOME", str(home))
    return home


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared test data not found at {SHARED_DATA} (CI always has it)")
    return SHARED_DATA
