"""Synthetic PVF archives for tests and benchmarks: presets, and one `synth` entry point per family."""

from __future__ import annotations

from pathlib import Path

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.archive.base import Progress
from deskbridge.kinds.pvf.strings.encodings import WINDOWS_950

PRESETS: dict[str, tuple[str, int]] = {
    "small": ("classic", 2_000),
    "classic-200k": ("classic", 200_000),
    "nkpi-1m": ("nkpi", 1_000_000),
    "nkpi-4m": ("nkpi", 4_300_000),
}
"""Named sizes from TARGETS.md: preset → (family, files). `nkpi-4m` is 110US-scale (4.31 M files in pvfine's
figures) for PVF-OPEN-4M."""


def synth(
    path: str | Path,
    *,
    family: str,
    files: int,
    seed: int,
    variant: str | None = None,
    encoding: str | None = None,
    progress: Progress | None = None,
    annotated: bool = False,
) -> int:
    """Write a deterministic synthetic archive; classic here, nkpi via `synth/nkpi.py` (`synth_nkpi`).
    `annotated` adds files carrying every section the built-in annotation rules cover (`synth/annotated.py`)."""
    if family == "classic":
        from deskbridge.kinds.pvf.synth.classic import synth_classic

        return synth_classic(
            path, files, seed, encoding=encoding or WINDOWS_950, progress=progress, annotated=annotated
        )
    if family == "nkpi":
        try:
            from deskbridge.kinds.pvf.synth.nkpi import synth_nkpi
        except ImportError:
            raise BridgeError(
                ErrorCode.UNSUPPORTED_VARIANT, "the nkpi synthesiser is not installed"
            ) from None
        result = synth_nkpi(path, files, seed, variant or "legacy", progress=progress, annotated=annotated)
        return int(result) if isinstance(result, int) else files
    raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"unknown family '{family}'; use classic or nkpi")
