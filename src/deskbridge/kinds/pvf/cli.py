"""The `deskbridge pvf …` commands: info, ls, cat, extract, pack, verify, synth."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.history import log_command

app = typer.Typer(help="Work with DNF Script.pvf archives.", no_args_is_help=True)
app.command("log")(log_command)  # version history (kinds/pvf/history.py)

EncodingOpt = Annotated[
    str | None,
    typer.Option("--encoding", "-e", help="Pack encoding: tw, cn, kr, jp, utf8 (classic; default: detect)."),
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

KEY_OPTIONS_HELP = (
    "pass --keys FILE (a key file), or --sk-dat PATH with --rsa-modulus HEX, "
    "--rsa-private-exponent HEX and --metadata-key HEX"
)
"""How the CLI takes key material; shown with every KEY_REQUIRED error."""


def _fail(exc: BridgeError) -> None:
    typer.echo(f"error: {exc.code}: {exc.message}", err=True)
    if exc.code == ErrorCode.KEY_REQUIRED:
        # The library's hint speaks of key material in general; here the user needs the option names.
        typer.echo(
            f"help: this archive needs key material from the game client: {KEY_OPTIONS_HELP}", err=True
        )
    elif exc.hint:
        typer.echo(f"help: {exc.hint}", err=True)
    raise typer.Exit(2)


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except BridgeError as exc:
        _fail(exc)


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


@app.command()
def info(
    archive: Path,
    json_out: Annotated[bool, typer.Option("--json")] = False,
    encoding: EncodingOpt = None,
    keys: KeysOpt = None,
    sk_dat: SkDatOpt = None,
    rsa_modulus: RsaModulusOpt = None,
    rsa_private_exponent: RsaExponentOpt = None,
    metadata_key: MetadataKeyOpt = None,
) -> None:
    """Show family, variant, encoding, file count and header fields."""
    with _errors():
        material = key_material(keys, sk_dat, rsa_modulus, rsa_private_exponent, metadata_key)
        ar = _open(archive, encoding, material)
        data = archive_info(ar)
    if json_out:
        typer.echo(json.dumps(data, ensure_ascii=False, indent=2))
        return
    for key, value in data.items():
        if key == "warnings":
            for w in value:
                typer.echo(f"warning: {w['code']}: {w['message']}")
        elif isinstance(value, dict):
            typer.echo(f"{key}:")
            for k, v in value.items():
                typer.echo(f"  {k}: {v}")
        else:
            typer.echo(f"{key}: {value}")


@app.command("ls")
def ls_cmd(
    archive: Path,
    prefix: Annotated[str, typer.Argument(help="Only paths starting with this.")] = "",
    json_out: Annotated[bool, typer.Option("--json")] = False,
    encoding: EncodingOpt = None,
    keys: KeysOpt = None,
    sk_dat: SkDatOpt = None,
    rsa_modulus: RsaModulusOpt = None,
    rsa_private_exponent: RsaExponentOpt = None,
    metadata_key: MetadataKeyOpt = None,
) -> None:
    """List the files (path and size)."""
    with _errors():
        material = key_material(keys, sk_dat, rsa_modulus, rsa_private_exponent, metadata_key)
        ar = _open(archive, encoding, material)
        want = prefix.replace("\\", "/").lower()
        rows = [ar.file_info(p) for p in ar.paths() if p.lower().startswith(want)]
    if json_out:
        typer.echo(json.dumps([r.to_dict() for r in rows], ensure_ascii=False))
        return
    for r in rows:
        typer.echo(f"{r.size:>10}  {r.path}")


@app.command()
def cat(
    archive: Path,
    path: str,
    raw: Annotated[bool, typer.Option("--raw", help="Write the payload bytes.")] = False,
    encoding: EncodingOpt = None,
    keys: KeysOpt = None,
    sk_dat: SkDatOpt = None,
    rsa_modulus: RsaModulusOpt = None,
    rsa_private_exponent: RsaExponentOpt = None,
    metadata_key: MetadataKeyOpt = None,
) -> None:
    """Print one file as editable text (scripts decompiled), or its raw payload with --raw."""
    with _errors():
        material = key_material(keys, sk_dat, rsa_modulus, rsa_private_exponent, metadata_key)
        ar = _open(archive, encoding, material)
        if raw:
            sys.stdout.buffer.write(ar.read(path))
            return
        typer.echo(ar.read_text(path), nl=False)


@app.command()
def extract(
    archive: Path,
    out: Annotated[Path, typer.Option("-o", "--out", help="Target directory (created).")],
    raw: Annotated[bool, typer.Option("--raw", help="Write decoded payload bytes, not text.")] = False,
    encoding: EncodingOpt = None,
    keys: KeysOpt = None,
    sk_dat: SkDatOpt = None,
    rsa_modulus: RsaModulusOpt = None,
    rsa_private_exponent: RsaExponentOpt = None,
    metadata_key: MetadataKeyOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Write every file under OUT as editable text (scripts, .str, .lst …) or raw bytes, plus a manifest."""
    from deskbridge.kinds.pvf.tree import extract_tree

    with _errors(), _progress("extract", quiet) as progress:
        material = key_material(keys, sk_dat, rsa_modulus, rsa_private_exponent, metadata_key)
        ar = _open(archive, encoding, material)
        summary = extract_tree(ar, out, raw=raw, progress=progress)
    typer.echo(
        f"extracted {summary['files']} files to {out} ({summary['text']} as text, {summary['raw']} raw)"
    )


@app.command()
def pack(
    directory: Path,
    out: Annotated[Path, typer.Option("-o", "--out", help="Archive to write.")],
    like: Annotated[
        Path | None,
        typer.Option("--like", help="Take family, variant, encoding and header from this archive."),
    ] = None,
    encoding: EncodingOpt = None,
    keys: KeysOpt = None,
    sk_dat: SkDatOpt = None,
    rsa_modulus: RsaModulusOpt = None,
    rsa_private_exponent: RsaExponentOpt = None,
    metadata_key: MetadataKeyOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Build an archive from an extracted tree (compiling text back to payloads)."""
    from deskbridge.kinds.pvf.tree import pack_tree

    with _errors(), _progress("pack", quiet) as progress:
        material = key_material(keys, sk_dat, rsa_modulus, rsa_private_exponent, metadata_key)
        summary = pack_tree(directory, out, like=like, encoding=encoding, keys=material, progress=progress)
    typer.echo(f"packed {summary['files']} files into {out} ({summary['family']}, {summary['encoding']})")


@app.command()
def verify(
    archive: Path,
    encoding: EncodingOpt = None,
    keys: KeysOpt = None,
    sk_dat: SkDatOpt = None,
    rsa_modulus: RsaModulusOpt = None,
    rsa_private_exponent: RsaExponentOpt = None,
    metadata_key: MetadataKeyOpt = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Read every file, check checksums, and round-trip every script text → bytes; exit 1 on problems."""
    from deskbridge.kinds.pvf.tree import verify_archive

    with _errors(), _progress("verify", quiet) as progress:
        material = key_material(keys, sk_dat, rsa_modulus, rsa_private_exponent, metadata_key)
        ar = _open(archive, encoding, material)
        report = verify_archive(ar, progress=progress)
    if json_out:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        typer.echo(
            f"files {report['files']}, scripts {report['scripts']}, text {report['text']}, "
            f"binary {report['binary']}"
        )
        for kind in ("unreadable", "checksum", "roundtrip"):
            for p in report[kind][:20]:
                typer.echo(f"{kind}: {p}")
        for w in report["warnings"]:
            typer.echo(f"warning: {w['code']}: {w['message']}")
    if report["unreadable"] or report["roundtrip"]:
        raise typer.Exit(1)


@app.command()
def synth(
    out: Annotated[Path, typer.Option("-o", "--out")],
    family: Annotated[str, typer.Option("--family", help="classic or nkpi")] = "classic",
    variant: Annotated[
        str | None, typer.Option("--variant", help="nkpi: legacy, guard, protected, paged")
    ] = None,
    files: Annotated[int | None, typer.Option("--files", help="Number of files.")] = None,
    seed: Annotated[int, typer.Option("--seed")] = 1,
    preset: Annotated[str | None, typer.Option("--preset", help="small, classic-200k or nkpi-1m")] = None,
    encoding: EncodingOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
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
    typer.echo(f"wrote {out} ({family}, {n} files, seed {seed})")
    key_file = Path(f"{out}.keys.json")
    if variant == "paged" and key_file.exists():
        typer.echo(f"wrote synthetic test page keys to {key_file} (open with --keys {key_file})")
