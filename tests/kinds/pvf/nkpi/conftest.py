"""Shared fixtures for the nkpi tests: the interop vectors and small synthetic archives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deskbridge.kinds.pvf.synth.nkpi import synth_nkpi

DATA = Path(__file__).resolve().parents[4] / "../shared/data/pvf"


@pytest.fixture(scope="session")
def manifest() -> dict:
    path = DATA / "manifest.json"
    if not path.exists():
        pytest.skip(f"shared PVF test vectors not found at {DATA}")
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def nkpi_vectors(manifest: dict) -> list[tuple[Path, dict]]:
    return [(DATA / a["archive"], a) for a in manifest["archives"] if a["format_family"] == "nkpi"]


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("nkpi-synth")


@pytest.fixture(scope="session")
def small_archives(synth_dir: Path) -> dict[str, Path]:
    """One 300-file synthetic archive per variant (the paged one with its generated `.keys.json`)."""
    out = {}
    for variant in ("legacy", "guard", "protected", "paged"):
        path = synth_dir / f"{variant}.pvf"
        synth_nkpi(path, 300, 11, variant)
        out[variant] = path
    return out
