"""PVF annotations: what the sections and tokens of DNF scripts mean (docs/pvf-annotations.md).

`rules.py` loads and validates rule files (built-ins in `builtin.json`, user files in the config folder);
`engine.py` reads a script's section tree and applies the rules through a `Resolver`.
"""

from deskbridge.kinds.pvf.annotations.engine import Annotator, parse
from deskbridge.kinds.pvf.annotations.rules import RuleSet, RuleStore, localize, schema

__all__ = ["Annotator", "RuleSet", "RuleStore", "localize", "parse", "schema"]
