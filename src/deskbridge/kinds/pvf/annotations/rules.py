"""Annotation rule files: load, validate against the JSON Schema, merge built-ins with user rules, search.

Format and schema: docs/pvf-annotations.md (`schema.json` beside this module). The built-in set is
`builtin.json`; user files are `<config dir>/pvf-annotations/*.json` (platformdirs, or `$DESKBRIDGE_HOME`),
read in name order. Priority is list order: user rules first (file by file), then the built-ins; a user rule
with a built-in's id replaces it, a user relation with a built-in's name replaces it. A user file that is not
valid JSON, fails the schema or names an unknown relation is refused as a whole with the JSON path of the
first failure; the other files and the built-ins keep working.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import read_regular_file

FORMAT = "deskbridge-pvf-annotations"
VERSION = 1
RULE_FILE_MAX_BYTES = 4 * 1024 * 1024
USER_DIR_NAME = "pvf-annotations"
LANGS = ("zh-CN", "en")

_PKG = "deskbridge.kinds.pvf.annotations"


def _package_json(name: str) -> Any:
    return json.loads(resources.files(_PKG).joinpath(name).read_text(encoding="utf-8"))


_SCHEMA: dict[str, Any] | None = None


def schema() -> dict[str, Any]:
    """The rule-file JSON Schema (package data; the same text is published in docs/pvf-annotations.md)."""
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = _package_json("schema.json")
    return _SCHEMA


def localize(label: Any, lang: str) -> str | None:
    """One text of a label (a string, or {lang: text}): `lang`, then its language without region, then en."""
    if label is None:
        return None
    if isinstance(label, str):
        return label
    if lang in label:
        return label[lang]
    base = lang.split("-")[0]
    for k, v in label.items():
        if k.split("-")[0] == base:
            return v
    return label.get("en") or next(iter(label.values()))


def label_texts(label: Any) -> list[str]:
    if label is None:
        return []
    return [label] if isinstance(label, str) else list(label.values())


def _refuse(file: str, json_path: str, message: str) -> BridgeError:
    return BridgeError(
        ErrorCode.INVALID_ARGUMENT,
        f"annotation rule file {file} is refused: {json_path}: {message}",
        "Fix the file (docs/pvf-annotations.md has the schema); the other rules keep working. "
        "pvf_annotation_search lists the rules in force and the refused files.",
        data={"file": file, "jsonPath": json_path},
    )


def validate_document(doc: Any, file: str, known_relations: set[str] | None = None) -> None:
    """Raise INVALID_ARGUMENT (data.jsonPath = the failing place) unless `doc` is a valid rule file.

    `known_relations`: relation names defined elsewhere (the built-ins) that references may use.
    """
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        err = jsonschema.exceptions.best_match(errors) or errors[0]
        raise _refuse(file, err.json_path, err.message[:300])
    relations = set(known_relations or ()) | set(doc.get("relations", {}))
    for name, rel in doc.get("relations", {}).items():
        for i, member in enumerate(rel.get("relations", [])):
            if member not in relations:
                raise _refuse(file, f"$.relations.{name}.relations[{i}]", f"unknown relation {member!r}")
    for i, rule in enumerate(doc.get("rules", [])):
        rel = rule["annotation"].get("relation")
        if rel is not None and rel not in relations:
            raise _refuse(file, f"$.rules[{i}].annotation.relation", f"unknown relation {rel!r}")
        rng = rule["target"].get("range")
        if rng and rng["endExclusive"] <= rng["start"]:
            raise _refuse(file, f"$.rules[{i}].target.range", "endExclusive must be greater than start")


def load_file(path: Path, known_relations: set[str] | None = None) -> dict[str, Any]:
    """Read and validate one user rule file (bounded, regular files only)."""
    shown = path.name
    raw = read_regular_file(path, max_bytes=RULE_FILE_MAX_BYTES, shown_as=shown)
    return parse_document(raw, shown, known_relations)


def parse_document(raw: bytes, shown: str, known_relations: set[str] | None = None) -> dict[str, Any]:
    """UTF-8 JSON bytes → a validated rule document (INVALID_ARGUMENT with data.jsonPath otherwise)."""
    if len(raw) > RULE_FILE_MAX_BYTES:
        raise _refuse(shown, "$", f"larger than {RULE_FILE_MAX_BYTES} bytes")
    try:
        doc = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise _refuse(shown, "$", "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise _refuse(shown, "$", f"not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    validate_document(doc, shown, known_relations)
    return doc


@dataclass
class RuleSet:
    """The rules in force, in priority order, with their relations and the refused user files."""

    rules: list[dict[str, Any]] = field(default_factory=list)
    relations: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    by_id: dict[str, dict[str, Any]] = field(default_factory=dict)

    def rule(self, rule_id: str) -> dict[str, Any]:
        rule = self.by_id.get(rule_id)
        if rule is None:
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                f"no annotation rule {rule_id!r}",
                "Find rule ids with pvf_annotation_search.",
            )
        return rule

    def search(self, query: str, extension: str | None = None) -> list[tuple[dict[str, Any], list[str]]]:
        """Rules whose id, title, section, content, enum values/labels or relation match `query`
        (case-insensitive, any language); `extension` keeps rules that apply to files of that extension."""
        q = query.strip().casefold()
        ext = None
        if extension:
            ext = extension.casefold() if extension.startswith(".") else "." + extension.casefold()
        out: list[tuple[dict[str, Any], list[str]]] = []
        for rule in self.rules:
            exts = [e.casefold() for e in rule["match"].get("extensions", [])]
            if ext is not None and exts and ext not in exts:
                continue
            if not q:
                out.append((rule, []))
                continue
            hits: list[str] = []
            ann = rule["annotation"]
            if q in rule["id"].casefold():
                hits.append("id")
            if any(q in t.casefold() for t in label_texts(ann["title"])):
                hits.append("title")
            section = rule["target"].get("section")
            if section and (q in section.casefold() or q.strip("[]") == section.casefold()):
                hits.append("section")
            if any(q in t.casefold() for t in label_texts(ann.get("content"))):
                hits.append("content")
            for key, label in (ann.get("values") or {}).items():
                if q == key.casefold() or any(q in t.casefold() for t in label_texts(label)):
                    hits.append(f"value {key}")
                    break
            rel = ann.get("relation")
            if rel and (
                q in rel.casefold()
                or any(q in t.casefold() for t in label_texts(self.relations.get(rel, {}).get("title")))
            ):
                hits.append("relation")
            if hits:
                out.append((rule, hits))
        return out


def _builtin() -> dict[str, Any]:
    doc = _package_json("builtin.json")
    validate_document(doc, "builtin.json")
    return doc


def merge(builtin: dict[str, Any], user_docs: list[tuple[str, dict[str, Any]]]) -> RuleSet:
    rs = RuleSet()
    for name, rel in builtin.get("relations", {}).items():
        rs.relations[name] = {**rel, "origin": "builtin"}
    for fname, doc in user_docs:
        for name, rel in doc.get("relations", {}).items():
            rs.relations[name] = {**rel, "origin": f"user:{fname}"}
    seen: set[str] = set()
    for fname, doc in user_docs:
        for rule in doc.get("rules", []):
            if rule["id"] not in seen:
                seen.add(rule["id"])
                rs.rules.append({**rule, "origin": f"user:{fname}"})
    for rule in builtin.get("rules", []):
        if rule["id"] not in seen:
            seen.add(rule["id"])
            rs.rules.append({**rule, "origin": "builtin"})
    rs.by_id = {r["id"]: r for r in rs.rules}
    return rs


class RuleStore:
    """The rule set, reloaded when a user rule file appears, changes or goes (checked on every call)."""

    def __init__(self, config_dir: Path | None) -> None:
        self.user_dir = None if config_dir is None else config_dir / USER_DIR_NAME
        self._lock = threading.Lock()
        self._sig: tuple[Any, ...] | None = None
        self._set: RuleSet | None = None
        self._docs: list[tuple[str, dict[str, Any]]] = []
        self._builtin = _builtin()

    def _signature(self) -> tuple[Any, ...]:
        if self.user_dir is None or not self.user_dir.is_dir():
            return ()
        sig = []
        for p in sorted(self.user_dir.glob("*.json")):
            try:
                st = p.stat()
            except OSError:
                continue
            sig.append((p.name, st.st_mtime_ns, st.st_size))
        return tuple(sig)

    def current(self) -> RuleSet:
        with self._lock:
            sig = self._signature()
            if self._set is None or sig != self._sig:
                self._set = self._load(sig)
                self._sig = sig
            return self._set

    def _load(self, sig: tuple[Any, ...]) -> RuleSet:
        known = set(self._builtin.get("relations", {}))
        docs: list[tuple[str, dict[str, Any]]] = []
        errors: list[dict[str, Any]] = []
        for name, _, _ in sig:
            assert self.user_dir is not None
            try:
                doc = load_file(self.user_dir / name, known)
            except BridgeError as exc:
                errors.append({"file": name, "message": exc.message, **(exc.data or {})})
                continue
            known |= set(doc.get("relations", {}))
            docs.append((name, doc))
        rs = merge(self._builtin, docs)
        rs.errors = errors
        rs.files = [n for n, _ in docs]
        self._docs = docs
        return rs

    def preview(self, text: str) -> RuleSet:
        """The rules in force with a draft rule file first (for a live preview; nothing is written)."""
        current = self.current()
        doc = parse_document(text.encode("utf-8"), "draft", set(current.relations))
        rs = merge(self._builtin, [("draft", doc), *self._docs])
        rs.errors = current.errors
        rs.files = ["draft", *current.files]
        return rs
