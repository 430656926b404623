"""Fixtures of the PVF tests that serve a workspace, run scripts or run `deskbridge pvf`: synthetic archives of
both families (and a paged nkpi one), made once per session; `archive` is a fresh copy per test, once per family;
`small_classic` is the archive the command tests read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from deskbridge.kinds.pvf.synth import synth
from deskbridge.kinds.pvf.synth.classic import synth_classic
from deskbridge.kinds.pvf.synth.nkpi import synth_nkpi

FAMILIES = ["classic", "nkpi"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pvf-src")
    out = {}
    for family in FAMILIES:
        p = root / f"{family}.pvf"
        synth(p, family=family, files=240, seed=3)
        out[family] = p
    paged = root / "paged.pvf"
    synth_nkpi(paged, 60, 5, "paged")
    out["paged"] = paged
    return out


@pytest.fixture(scope="session")
def small_classic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A classic archive of 120 files for the `deskbridge pvf` command tests, made once: read only (a test that
    needs it changed writes a copy)."""
    path = tmp_path_factory.mktemp("pvf-cli") / "small.pvf"
    synth_classic(path, 120, seed=5)
    return path


@pytest.fixture(params=FAMILIES)
def family(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def archive(archives: dict[str, Path], family: str, tmp_path: Path) -> Path:
    dest = tmp_path / "Script.pvf"
    shutil.copyfile(archives[family], dest)
    return dest
