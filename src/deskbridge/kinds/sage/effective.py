"""The effective (merged) asset: the inheritFrom chain and xai:joinAction applied, with provenance."""

from __future__ import annotations

from typing import Any

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.sage.model import SageIndex


def get_effective_asset(
    index: SageIndex, asset_type: str, ident: str, cursor: str | None = None, limit: int | None = None
) -> dict[str, Any]:
    raise BridgeError(ErrorCode.NOT_FOUND, "not implemented yet", hint="Call sage_get_definition instead.")
