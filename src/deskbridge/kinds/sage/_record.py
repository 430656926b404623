"""`Record`: what `@dataclass` gave the index's value classes (equality, repr, a copy with changes), without
importing `dataclasses` — which pulls in `inspect`, `ast`, `dis` and `tokenize`, ~10 ms of CPU of a warm
`deskbridge sage …` process (measured: `python -c "import dataclasses"` against a baseline of the modules a
warm start loads anyway). Each subclass names its fields in `_fields` and writes its own `__init__`."""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` is not imported at run time either (~5 ms); type checkers see True
if TYPE_CHECKING:
    from typing import Any, Self


class Record:
    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable, like a dataclass with eq=True

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({inner})"

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes` (as `dataclasses.replace`: every other field is shared, not copied)."""
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        return type(self)(**values)
