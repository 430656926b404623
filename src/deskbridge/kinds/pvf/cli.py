"""The `deskbridge pvf …` commands: info, ls, cat, extract, pack, verify, synth."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, NoReturn

import typer

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.terminal import json_text, printable
from deskbridge.kinds.pvf.history import log_command

HELP = """DNF Script.pvf archives: info, ls, cat, get, set, add, rm, extract, pack, verify, synth, log.

Change one file in place (the archive is verified before it is replaced; ARCHIVE.bak keeps the old one):

```
deskbridge pvf get Script.pvf equipment/weapon/sword.equ -o sword.equ
# edit sword.equ, then:
deskbridge pvf set Script.pvf equipment/weapon/sword.equ sword.equ
deskbridge pvf add Script.pvf equipment/weapon/newsword.equ newsword.equ
deskbridge pvf rm Script.pvf equipment/weapon/oldsword.equ
```

Many files: extract to a folder, edit there, pack a new archive and check it:

```
deskbridge pvf extract Script.pvf -o tree/
deskbridge pvf pack tree/ -o Script.new.pvf --like Script.pvf
deskbridge pvf verify Script.new.pvf
```

Classic packs hold text in a Windows code page: -e tw (950), cn (936), kr (949), jp (932), gb18030 or
utf8; without -e it is detected from stringtable.bin.
"""

app = typer.Typer(help=HELP, no_args_is_help=True)
app.command("log")(log_command)  # version history (kinds/pvf/history.py)

EDIT_FILE_MAX_BYTES = 256 * 1024 * 1024
"""Largest file `set`/`add` read (a script payload cannot exceed a chunk's 256 MiB)."""

ArchiveArg = Annotated[Path, typer.Argument(help="The .pvf archive.")]
PathArg = Annotated[
    str, typer.Argument(help="Path inside the archive, e.g. equipment/weapon/sword.equ (any case).")
]
EncodingOpt = Annotated[
    str | None,
    typer.Option(
        "--encoding",
        "-e",
        help="Pack encoding: tw, cn, kr, jp, gb18030, utf8 (classic; default: detected from stringtable.bin).",
    ),
]
SynthEncodingOpt = Annotated[
    str | None,
    typer.Option(
        "--encoding", "-e", help="Pack encoding: tw (the default), cn, kr, jp, gb18030, utf8 (classic)."
    ),
]
KeysOpt = Annotated[
    Path | None,
    typer.Option(
        "--keys",
        help="Key material file for paged nkpi archives (JSON: page_keys, or sk_dat + RSA + metadata key).",
    ),
]
SkDatOpt = Annotated[
    Path | None,
    typer.Option("--sk-dat", help="Paged nkpi: the client's sk.dat (needs the three key parameters below)."),
]
RsaModulusOpt = Annotated[
    str | None,
    typer.Option("--rsa-modulus", metavar="HEX", help="Paged nkpi: RSA modulus that opens sk.dat (hex)."),
]
RsaExponentOpt = Annotated[
    str | None,
    typer.Option(
        "--rsa-private-exponent", metavar="HEX", help="Paged nkpi: RSA private exponent for sk.dat (hex)."
    ),
]
MetadataKeyOpt = Annotated[
    str | None,
    typer.Option("--metadata-key", metavar="HEX", help="Paged nkpi: 32-byte metadata key (64 hex digits)."),
]

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]

KEY_OPTIONS_HELP = (
    "pass --keys FILE (a key file), or --sk-dat PATH with --rsa-modulus HEX, "
    "--rsa-private-exponent HEX and --metadata-key HEX"
)
"""How the CLI takes key material; shown with every KEY_REQUIRED error."""


def _say(text: str, err: bool = False) -> None:
    """`typer.echo` for what the commands say about an archive (names, messages), control characters spelled out
    (`core.terminal.printable`: a file may be named anything); never for a file's content."""
    typer.echo(printable(text), err=err)


def _fail(exc: BridgeError) -> None:
    _say(f"error: {exc.code}: {exc.message}", err=True)
    if exc.code == ErrorCode.KEY_REQUIRED:
        # The library's hint speaks of key material in general; here the user needs the option names.
        _say(f"help: this archive needs key material from the game client: {KEY_OPTIONS_HELP}", err=True)
    elif exc.hint:
        _say(f"help: {exc.hint}", err=True)
    raise typer.Exit(2)


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except BridgeError as exc:
        _fail(exc)


def _missing_file(exc: BridgeError, ar: Any, archive: Path, path: str) -> BridgeError:
    """A NOT_FOUND for `path` with what the archive does hold near it: the closest names in the same folder
    (a typo, a digit too few) and the `pvf ls` command that lists that folder, instead of the library's
    "list or search first" (which names no command)."""
    if exc.code is not ErrorCode.NOT_FOUND:
        return exc
    import difflib

    want = path.replace("\\", "/").strip("/").lower()
    folder = want.rsplit("/", 1)[0] + "/" if "/" in want else ""
    siblings = [p.lower() for p in ar.paths() if p.lower().startswith(folder)]
    if not folder:
        siblings = [p for p in siblings if "/" not in p]
    close = difflib.get_close_matches(want, siblings, n=3, cutoff=0.8)
    hint = (f"Closest: {', '.join(close)}. " if close else "") + (
        f"List the folder with `deskbridge pvf ls {archive} {folder}`"
        if siblings and folder
        else f"Nothing is under '{folder}'; list every file with `deskbridge pvf ls {archive}`"
        if folder
        else f"List every file with `deskbridge pvf ls {archive}`"
    )
    return BridgeError(exc.code, exc.message, hint + ".", data=exc.data)


@contextmanager
def _progress(label: str, quiet: bool = False) -> Iterator[Callable[[int, int], None]]:
    """A rich progress bar on stderr; `update(done, total)` drives it (no bar when quiet or not a TTY)."""
    if quiet or not sys.stderr.isatty():
        yield lambda done, total: None
        return
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn(label), BarColumn(), TaskProgressColumn(), TimeRemainingColumn(), transient=True
    ) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _hex_int(value: str, option: str) -> int:
    digits = value.strip().lower().removeprefix("0x")
    try:
        return int(digits, 16)
    except ValueError:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT, f"{option} must be a hex number, got '{value}'"
        ) from None


def key_material(
    keys: Path | None = None,
    sk_dat: Path | None = None,
    rsa_modulus: str | None = None,
    rsa_private_exponent: str | None = None,
    metadata_key: str | None = None,
) -> Any:
    """The `keys=` argument of `open_archive` from the CLI options: None, the key file, or `load_keys` fields
    (explicit options win over the key file's fields, as in `nkpi_paged.load_keys`)."""
    fields: dict[str, Any] = {}
    if sk_dat is not None:
        fields["sk_dat"] = sk_dat
    if rsa_modulus is not None:
        fields["rsa_modulus"] = _hex_int(rsa_modulus, "--rsa-modulus")
    if rsa_private_exponent is not None:
        fields["rsa_private_exponent"] = _hex_int(rsa_private_exponent, "--rsa-private-exponent")
    if metadata_key is not None:
        fields["metadata_key"] = metadata_key.strip().lower().removeprefix("0x")
    if not fields:
        return keys
    if "sk_dat" not in fields and keys is None:
        raise BridgeError(
            ErrorCode.KEY_REQUIRED,
            "the RSA and metadata key options only work together with "
            "--sk-dat (or a --keys file that names sk.dat)",
        )
    if keys is not None:
        fields["key_file"] = keys
    return fields


def _open(path: Path, encoding: str | None = None, keys: Any = None) -> Any:
    from deskbridge.kinds.pvf.archive import open_archive

    return open_archive(path, encoding=encoding, keys=keys)


@dataclass(frozen=True)
class OpenOptions:
    """How to open an archive, the options of every command that reads one: the pack encoding and, for a
    paged nkpi archive, the key material."""

    encoding: str | None
    keys: Path | None
    sk_dat: Path | None
    rsa_modulus: str | None
    rsa_private_exponent: str | None
    metadata_key: str | None

    def material(self) -> Any:
        return key_material(
            self.keys, self.sk_dat, self.rsa_modulus, self.rsa_private_exponent, self.metadata_key
        )

    def open(self, archive: Path) -> Any:
        return _open(archive, self.encoding, self.material())


def _keyword_options(*rows: tuple[str, Any, Any]) -> list[inspect.Parameter]:
    return [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
        for name, annotation, default in rows
    ]


_OPEN_PARAMS: Final = _keyword_options(
    ("encoding", EncodingOpt, None),
    ("keys", KeysOpt, None),
    ("sk_dat", SkDatOpt, None),
    ("rsa_modulus", RsaModulusOpt, None),
    ("rsa_private_exponent", RsaExponentOpt, None),
    ("metadata_key", MetadataKeyOpt, None),
)


def _bundled_command(
    name: str | None, bundle: type[OpenOptions], params: list[inspect.Parameter]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register `fn(..., *, opts: <bundle>, ...)` as the command `name` whose CLI takes `params` where `fn`
    has `opts`, handing `fn` them as one `bundle`: each command declares only what is its own, and `--help`
    lists the shared options in one order everywhere."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        expanded: list[inspect.Parameter] = []
        for p in inspect.signature(fn, eval_str=True).parameters.values():
            expanded.extend(params if p.name == "opts" else [p])

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            shared = bundle(**{p.name: kwargs.pop(p.name) for p in params})
            return fn(*args, **kwargs, opts=shared)

        command.__signature__ = inspect.Signature(expanded)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in expanded}
        return app.command(name)(command)

    return register


def read_command(name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register `fn(..., *, opts: OpenOptions, ...)` as the command `name` (see `_bundled_command`)."""
    return _bundled_command(name, OpenOptions, _OPEN_PARAMS)


def archive_info(ar: Any) -> dict[str, Any]:
    """Family, variant, encoding, counts and header fields of an open archive (`info --json`)."""
    paths = ar.paths()
    out: dict[str, Any] = {
        "family": ar.family,
        "variant": ar.variant,
        "encoding": ar.encoding,
        "files": len(paths),
        "source": str(ar.source) if ar.source else None,
    }
    header = getattr(ar, "header", None)
    if header is not None and hasattr(header, "to_dict"):
        out["header"] = header.to_dict()
    info = getattr(ar, "info", None)
    if callable(info):
        out.update({k: v for k, v in info().items() if k not in out})
    detection = getattr(ar, "detection", None)
    if detection is not None:
        out["encodingScores"] = {k: round(v, 3) for k, v in detection.scores.items()}
        out["encodingConfident"] = detection.confident
    check = getattr(ar, "check_encoding", None)
    if callable(check):
        check()
    out["warnings"] = [w.to_dict() for w in ar.warnings]
    return out


@read_command()
def info(
    archive: ArchiveArg,
    json_out: JsonOpt = False,
    *,
    opts: OpenOptions,
) -> None:
    """Show family, variant, encoding, file count and header fields."""
    with _errors():
        ar = opts.open(archive)
        data = archive_info(ar)
    if json_out:
        typer.echo(json_text(data, indent=2))
        return
    for key, value in data.items():
        if key == "warnings":
            for w in value:
                _say(f"warning: {w['code']}: {w['message']}")
        elif isinstance(value, dict):
            _say(f"{key}:")
            for k, v in value.items():
                _say(f"  {k}: {v}")
        else:
            _say(f"{key}: {value}")


@read_command("ls")
def ls_cmd(
    archive: ArchiveArg,
    prefix: Annotated[str, typer.Argument(help="Only paths starting with this.")] = "",
    json_out: JsonOpt = False,
    *,
    opts: OpenOptions,
) -> None:
    """List the files (path and size)."""
    with _errors():
        ar = opts.open(archive)
        want = prefix.replace("\\", "/").lower()
        rows = [ar.file_info(p) for p in ar.paths() if p.lower().startswith(want)]
    if json_out:
        typer.echo(json_text([r.to_dict() for r in rows]))
        return
    for r in rows:
        _say(f"{r.size:>10}  {r.path}")
    if not rows and prefix:  # said on stderr: an empty listing looked like an empty archive
        _say(
            f"no file in {archive} starts with '{prefix}' (any case); `deskbridge pvf ls {archive}` lists all",
            err=True,
        )


@read_command()
def cat(
    archive: ArchiveArg,
    path: PathArg,
    raw: Annotated[bool, typer.Option("--raw", help="Write the payload bytes.")] = False,
    *,
    opts: OpenOptions,
) -> None:
    """Print one file as editable text (scripts decompiled), or its raw payload with --raw."""
    with _errors():
        ar = opts.open(archive)
        try:
            data = ar.read(path) if raw else None
            text = ar.read_text(path) if not raw else ""
        except BridgeError as exc:
            raise _missing_file(exc, ar, archive, path) from None
        if data is not None:
            sys.stdout.buffer.write(data)
            return
        typer.echo(text, nl=False)


@read_command()
def extract(
    archive: ArchiveArg,
    out: Annotated[Path, typer.Option("-o", "--out", help="Target directory (created).")],
    raw: Annotated[bool, typer.Option("--raw", help="Write decoded payload bytes, not text.")] = False,
    *,
    opts: OpenOptions,
    force: Annotated[
        bool, typer.Option("--force", help="Write into a non-empty folder (files there are overwritten).")
    ] = False,
    quiet: QuietOpt = False,
) -> None:
    """Write every file under OUT as editable text (scripts, .str, .lst …) or raw bytes, plus a manifest.

    OUT must be new or empty (a second archive extracted over a first would pack as a mix of both) unless
    --force. Files that have a text form but were written raw are named with the reason; when scripts
    are among them the exit status is 1 (the tree still packs back to the same bytes). An archive naming a
    file with a control character (\\x01, a newline …), `..` or a drive is refused before anything is
    written (never escaped: the tree would pack back under other names).
    """
    from deskbridge.kinds.pvf.tree import extract_tree

    existed = out.exists()
    try:
        with _errors(), _progress("extract", quiet) as progress:
            ar = opts.open(archive)
            summary = extract_tree(ar, out, raw=raw, force=force, progress=progress)
    except KeyboardInterrupt:
        # Say what is on disk (it ended silently with 130): a new folder is published whole or not at all;
        # over an existing one (--force) the manifest marks the part written as incomplete.
        state = (
            f"{out} holds a partial extraction, marked incomplete (pack refuses it); run the same extract "
            "again to finish it"
            if existed and force and out.is_dir() and any(out.iterdir())
            else f"nothing was written ({out} is still the empty folder it was)"
            if existed
            else f"nothing was written ({out} was not created)"
        )
        _say(f"interrupted: {state}", err=True)
        raise typer.Exit(130) from None
    for w in summary["warnings"]:
        _say(f"warning: {w['code']}: {w['message']}", err=True)
    fallbacks = summary["fallbacks"]
    for f in fallbacks[:20]:
        _say(f"raw: {f['path']}: {f['reason']}", err=True)
    if len(fallbacks) > 20:
        _say(f"raw: … and {len(fallbacks) - 20} more", err=True)
    _say(f"extracted {summary['files']} files to {out} ({summary['text']} as text, {summary['raw']} raw)")
    if summary["script_fallbacks"]:
        _say(
            f"error: {summary['script_fallbacks']} scripts could not be converted to text and were written "
            "raw (listed above)",
            err=True,
        )
        _say("help: check the pack encoding (-e) or run `deskbridge pvf verify` on the archive", err=True)
        raise typer.Exit(1)


@read_command()
def pack(
    directory: Annotated[Path, typer.Argument(help="A folder written by `pvf extract` (and edited).")],
    out: Annotated[Path, typer.Option("-o", "--out", help="Archive to write.")],
    like: Annotated[
        Path | None,
        typer.Option("--like", help="Take family, variant, encoding and header from this archive."),
    ] = None,
    *,
    opts: OpenOptions,
    force: Annotated[bool, typer.Option("--force", help="Replace OUT if it exists.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Build an archive from an extracted tree (compiling text back to payloads).

    OUT must not exist unless --force. Names that differ only in case are refused; scripts with string
    links need n_string.lst. Example: `deskbridge pvf pack tree/ -o Script.new.pvf --like Script.pvf`.
    """
    from deskbridge.core.files import file_identity
    from deskbridge.integrations.endpoints import claim_for_command
    from deskbridge.kinds.pvf.tree import pack_tree

    before = None
    lock = None
    try:
        with _errors():
            before = file_identity(out) if out.is_file() else None
            if before is not None and force:
                # Replacing an archive a serve or an MCP client has open would leave that session on the old
                # bytes (its next save refused), as `pvf set` in place would: refused the same way.
                lock = claim_for_command(out)
        with _errors(), _progress("pack", quiet) as progress:
            summary = pack_tree(
                directory,
                out,
                like=like,
                encoding=opts.encoding,
                keys=opts.material(),
                force=force,
                progress=progress,
            )
    except KeyboardInterrupt:
        # It ended silently with 130. OUT is published whole or not at all (a --force replace is atomic too).
        if before is None and not out.exists():
            _say(f"interrupted: nothing was written ({out} does not exist)", err=True)
            raise typer.Exit(130) from None
        if before is None:
            _say(
                f"interrupted: {out} was already written whole (the interrupt came after the write)", err=True
            )
            raise typer.Exit(130) from None
        _interrupted(out, before, saving=True)
    finally:
        if lock is not None:
            lock.release()
    for w in summary.get("warnings", []):
        _say(f"warning: {w}", err=True)
    _say(f"packed {summary['files']} files into {out} ({summary['family']}, {summary['encoding']})")


@read_command()
def verify(
    archive: ArchiveArg,
    *,
    opts: OpenOptions,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Read every file, check checksums, and round-trip every script text → bytes.

    Exit status 1 on any problem: an unreadable file, a checksum failure, a structural warning (e.g. the
    tree checksum), a script whose text conversion fails, or a round trip that changes bytes; a summary
    line counts each kind.
    """
    from deskbridge.kinds.pvf.tree import VERIFY_PROBLEMS, verify_archive

    with _errors(), _progress("verify", quiet) as progress:
        ar = opts.open(archive)
        report = verify_archive(ar, progress=progress)
    if json_out:
        typer.echo(json_text(report, indent=2))
    else:
        _say(
            f"files {report['files']}, scripts {report['scripts']}, text {report['text']}, "
            f"binary {report['binary']}"
        )
        for kind in ("unreadable", "checksum", "duplicates", "conversion", "roundtrip", "textFallback"):
            for p in report[kind][:20]:
                _say(f"{kind}: {p}")
            if len(report[kind]) > 20:
                _say(f"{kind}: … and {len(report[kind]) - 20} more")
        for w in report["warnings"]:
            _say(f"warning: {w['code']}: {w['message']}")
        for line in report["links"][:20]:
            _say(f"warning: link: {line}")
        if len(report["links"]) > 20:
            _say(f"warning: link: … and {len(report['links']) - 20} more")
        counts = ", ".join(f"{len(report[k])} {k}" for k in VERIFY_PROBLEMS if report[k])
        _say(f"verify: {report['problems']} problems ({counts})" if counts else "verify: no problems")
    if report["problems"]:
        raise typer.Exit(1)


@app.command()
def synth(
    out: Annotated[Path, typer.Option("-o", "--out", help="Archive to write.")],
    family: Annotated[str, typer.Option("--family", help="classic or nkpi")] = "classic",
    variant: Annotated[
        str | None, typer.Option("--variant", help="nkpi: legacy, guard, protected, paged")
    ] = None,
    files: Annotated[int | None, typer.Option("--files", help="Number of files.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Same seed, same bytes.")] = 1,
    preset: Annotated[
        str | None,
        typer.Option("--preset", help="small, classic-200k, nkpi-1m or nkpi-4m (110US-scale, 4.3 M files)"),
    ] = None,
    encoding: SynthEncodingOpt = None,
    quiet: QuietOpt = False,
    annotated: Annotated[
        bool, typer.Option("--annotated", help="Add files with every section the annotation rules cover.")
    ] = False,
) -> None:
    """Write a deterministic synthetic archive (DNF-like folders, registries, string tables, CJK)."""
    from deskbridge.kinds.pvf.strings.encodings import resolve_encoding
    from deskbridge.kinds.pvf.synth import PRESETS
    from deskbridge.kinds.pvf.synth import synth as make

    with _errors():
        if preset is not None:
            if preset not in PRESETS:
                raise BridgeError("INVALID_ARGUMENT", f"unknown preset '{preset}'; use {', '.join(PRESETS)}")
            family, default_files = PRESETS[preset]
            files = files or default_files
        with _progress("synth", quiet) as progress:
            n = make(
                out,
                family=family,
                files=files or 2000,
                seed=seed,
                variant=variant,
                encoding=resolve_encoding(encoding) if encoding else None,
                progress=progress,
                annotated=annotated,
            )
    _say(f"wrote {out} ({family}, {n} files, seed {seed})")
    key_file = Path(f"{out}.keys.json")
    if variant == "paged" and key_file.exists():
        _say(f"wrote synthetic test page keys to {key_file} (open with --keys {key_file})")


BackupOpt = Annotated[
    bool,
    typer.Option("--backup/--no-backup", help="Keep the archive as it was in ARCHIVE.bak (default: on)."),
]
OutOpt = Annotated[
    Path | None,
    typer.Option("-o", "--out", help="Write the changed archive here instead of changing ARCHIVE in place."),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="With -o: replace OUT if it exists.")]
RawOpt = Annotated[
    bool, typer.Option("--raw", help="The file holds payload bytes, not editable text (no compiling).")
]


def _read_input(source: str) -> bytes:
    """The new content: a file (regular files only, bounded) or standard input for `-`."""
    if source == "-":
        data = sys.stdin.buffer.read(EDIT_FILE_MAX_BYTES + 1)
        if len(data) > EDIT_FILE_MAX_BYTES:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED, f"standard input is over the {EDIT_FILE_MAX_BYTES:,}-byte limit"
            )
        return data
    from deskbridge.core.files import read_regular_file

    return read_regular_file(Path(source), max_bytes=EDIT_FILE_MAX_BYTES, shown_as=source)


def _stage_input(ar: Any, path: str, data: bytes, raw: bool) -> None:
    if raw:
        ar.stage(path, data)
        return
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # An editor opening a text in the game's code page saves it back in that code page. --raw is no way out for
        # such a file: it stores the bytes as the payload itself, i.e. script text where compiled tokens belong.
        as_pack = False
        if ar.encoding and ar.encoding.lower() not in ("utf-8", "utf8"):
            try:
                data.decode(ar.encoding)
                as_pack = True
            except (UnicodeDecodeError, LookupError):
                pass
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"the new content of '{path}' is not UTF-8 text (byte {exc.start})"
            + (f"; it reads as {ar.encoding}, the pack's code page" if as_pack else ""),
            (
                f"Save it as UTF-8 (what `pvf get` writes): your editor kept {ar.encoding}; reopen the file as "
                f"{ar.encoding} and save it with UTF-8 encoding, then retry."
                if as_pack
                else "Save it as UTF-8 (what `pvf get` writes), then retry."
            )
            + " --raw is only for the payload bytes `pvf get --raw` wrote (stored as they are, never compiled).",
            data={"path": path, "position": exc.start},
        ) from None
    ar.stage_text(path, text)


@dataclass(frozen=True)
class WriteOptions(OpenOptions):
    """The options every command that changes an archive takes (`set`, `add`, `rm`): where the result goes,
    the backup, and how to open the archive."""

    out: Path | None
    force: bool
    backup: bool


_WRITE_PARAMS: Final = [
    *_keyword_options(("out", OutOpt, None), ("force", ForceOpt, False), ("backup", BackupOpt, True)),
    *_OPEN_PARAMS,
]


def write_command(name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register `fn(..., opts: WriteOptions)` as the command `name`: `fn`'s own arguments, then the shared
    write options (see `_bundled_command`)."""
    return _bundled_command(name, WriteOptions, _WRITE_PARAMS)


def _edit(
    archive: Path, change: Callable[[Any, bytes | None], None], opts: WriteOptions, source: str | None = None
) -> None:
    """Open, apply `change` (it stages), then save in place through the guarded writer or into `opts.out`:
    the one "open guarded, change, write" path of `set`, `add` and `rm`. `source` is read first (a file, or
    stdin for `-`) and handed to `change` with the archive (None without `source`).

    In place: the archive's identity (content hash included) is taken when it is opened and checked
    again right before the rename, so a change another program made meanwhile is `SOURCE_CHANGED` and
    nothing is written; the written temp file is verified first; `--backup` keeps ARCHIVE.bak.
    """
    from deskbridge.core.files import file_identity
    from deskbridge.integrations.endpoints import claim_for_command
    from deskbridge.kinds.pvf.tree import refuse_existing

    identity = None
    saving = False
    lock = None
    try:
        with _errors():
            material = opts.material()
            data = _read_input(source) if source is not None else None
            if opts.out is None:
                lock = claim_for_command(archive)
            elif opts.out.is_file():
                lock = claim_for_command(opts.out)  # --force over an archive a session may have open
            identity = file_identity(archive) if opts.out is None else None
            ar = _open(archive, opts.encoding, material)
            try:
                change(ar, data)
                if opts.out is None and not ar.staged():
                    # The same content (e.g. `pvf get` then `pvf set` unedited): writing would only replace
                    # ARCHIVE.bak, the one copy of the archive before the last real change, with this same one.
                    _say(f"nothing changed: {archive} already holds that content; nothing was written")
                    return
                if opts.out is not None:
                    if not opts.force:
                        refuse_existing(opts.out)
                    report = ar.save_copy(opts.out)
                    commit = None
                else:
                    commit = {
                        name: (name, ar.read_original(name) if ar.has_original(name) else None, after)
                        for name, after in ar.staged().items()
                    }
                    saving = True
                    report = ar.save(backup=opts.backup, expected_identity=identity)
                    saving = False
            finally:
                ar.close()
    except KeyboardInterrupt:
        _interrupted(archive, identity, saving)  # with -o the archive itself is never written
    finally:
        if lock is not None:
            lock.release()
    done = ", ".join(report.changed) or "nothing"
    extra = f"; backup {report.backup}" if report.backup else ""
    _say(f"wrote {report.target} ({done}; {report.verified} verified{extra})")
    if commit:
        _record_history(archive, commit)


def _interrupted(target: Path, identity: Any, saving: bool) -> NoReturn:
    """Ctrl-C during `set` / `add` / `rm`: say what state the file is in (it ended silently with 130). Before the
    save nothing was written; during it the write goes to a temporary file renamed over the archive, so it is
    either the old one or the whole new one — the content hash says which."""
    from deskbridge.core.files import file_identity

    same: bool | None = True
    if saving:
        try:
            now = file_identity(target)
            same = identity is not None and (now.size, now.sha256) == (identity.size, identity.sha256)
        except (BridgeError, OSError):
            same = None
    state = {
        True: "unchanged",
        False: "already replaced by the new one (the interrupt came after the write)",
        None: "in an unknown state",
    }[same]
    _say(f"interrupted: {target} is {state}", err=True)
    raise typer.Exit(130)


def _record_history(archive: Path, commit: dict[str, tuple[str, bytes | None, bytes | None]]) -> None:
    """An in-place `set` / `add` / `rm` is a save like the server's: it goes into the archive's version history
    (`deskbridge pvf log`, the export sources `working` / `commit`) with source `cli` and revision 0 (there is
    no workspace revision). The archive is written by then, so a failure here is a warning, not an error."""
    from deskbridge.kinds.pvf.history import Journal
    from deskbridge.settings import deskbridge_dirs

    try:
        Journal(deskbridge_dirs().data, archive.expanduser().resolve()).record(
            commit, caller="cli", revision=0
        )
    except (BridgeError, OSError) as exc:
        _say(f"warning: the change is saved but not recorded in the history: {exc}", err=True)


def _put(archive: Path, path: str, source: str, raw: bool, opts: WriteOptions, *, replace: bool) -> None:
    """The body of `set` (`replace`: the file must be there) and `add` (it must not be, in any case): read
    SOURCE, stage it at `path` (compiled from editable text, or the bytes with --raw) and write the archive."""

    def change(ar: Any, data: bytes | None) -> None:
        assert data is not None
        if ar.exists(path) != replace:
            refusal = (
                (
                    ErrorCode.NOT_FOUND,
                    f"no file '{path}' in {archive}",
                    "Use `deskbridge pvf add` to add a new file (or `pvf ls` to find the path).",
                )
                if replace
                else (
                    ErrorCode.TARGET_EXISTS,
                    f"'{path}' is already in {archive} (as '{ar.file_info(path).path}')",
                    "Use `deskbridge pvf set` to replace it.",
                )
            )
            raise BridgeError(*refusal, data={"path": path})
        if not replace:  # a new name follows the import's rules (no `..`, drive or reserved names)
            from deskbridge.kinds.pvf.paths import check_archive_path

            check_archive_path(path)
        _stage_input(ar, path, data, raw)

    _edit(archive, change, opts, source)


@read_command()
def get(
    archive: ArchiveArg,
    path: PathArg,
    out: Annotated[
        Path | None, typer.Option("-o", "--out", help="Write to this file (default: stdout).")
    ] = None,
    raw: Annotated[bool, typer.Option("--raw", help="The payload bytes, not editable text.")] = False,
    *,
    opts: OpenOptions,
) -> None:
    """Get one file: editable UTF-8 text (scripts decompiled), or its payload bytes with --raw.

    Example: `deskbridge pvf get Script.pvf equipment/weapon/sword.equ -o sword.equ`, edit, then `pvf set`.
    """
    with _errors():
        ar = opts.open(archive)
        try:
            data = ar.read(path) if raw else ar.read_text(path).encode("utf-8")
        except BridgeError as exc:
            raise _missing_file(exc, ar, archive, path) from None
        if out is None:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            return
        from deskbridge.core.files import atomic_write

        atomic_write(out, data)
    _say(f"wrote {out} ({len(data)} bytes)", err=True)


@write_command("set")
def set_cmd(
    archive: ArchiveArg,
    path: PathArg,
    source: Annotated[str, typer.Argument(metavar="FILE|-", help="The new content (- reads stdin).")],
    raw: RawOpt = False,
    *,
    opts: WriteOptions,
) -> None:
    """Replace one existing file with FILE (editable text as `pvf get` writes it, or bytes with --raw).

    The archive is changed in place (verified first, old one kept as ARCHIVE.bak) or written to -o.
    Example: `deskbridge pvf set Script.pvf equipment/weapon/sword.equ sword.equ`.
    """
    _put(archive, path, source, raw, opts, replace=True)


@write_command()
def add(
    archive: ArchiveArg,
    path: PathArg,
    source: Annotated[str, typer.Argument(metavar="FILE|-", help="The content (- reads stdin).")],
    raw: RawOpt = False,
    *,
    opts: WriteOptions,
) -> None:
    """Add a new file at PATH (stored lower case; refused if a file with that path, in any case, exists).

    Example: `deskbridge pvf add Script.pvf equipment/weapon/newsword.equ newsword.equ`. Register it in
    its .lst (get, edit, set the list) for the game to find it.
    """
    _put(archive, path, source, raw, opts, replace=False)


@write_command()
def rm(
    archive: ArchiveArg,
    paths: Annotated[list[str], typer.Argument(help="Archive paths to delete.")],
    *,
    opts: WriteOptions,
) -> None:
    """Delete files from the archive (all or none: a path that is not there stops before anything changes).

    Example: `deskbridge pvf rm Script.pvf equipment/weapon/oldsword.equ`.
    """

    def change(ar: Any, data: bytes | None) -> None:
        missing = [p for p in paths if not ar.exists(p)]
        if missing:
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                f"no file '{missing[0]}' in {archive}"
                + (f" (and {len(missing) - 1} more)" if missing[1:] else ""),
                "Check the paths with `deskbridge pvf ls`; nothing was deleted.",
                data={"paths": missing},
            )
        for p in paths:
            ar.stage(p, None)

    _edit(archive, change, opts)
