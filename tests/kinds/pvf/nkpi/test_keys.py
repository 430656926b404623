"""Unknown seeds are recovered from known plaintext; paged page keys come from a user-supplied sk.dat."""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.archive import nkpi_cipher as c
from deskbridge.kinds.pvf.archive.nkpi import open_nkpi
from deskbridge.kinds.pvf.archive.nkpi_paged import aes_cbc_encrypt, load_keys, unwrap_sk_dat
from deskbridge.kinds.pvf.archive.nkpi_recover import recover_zlib_seed, seeds_from_word
from deskbridge.kinds.pvf.synth.nkpi import synth_nkpi


def _slow_crypt(data: bytes, seed: int, magic: int) -> bytes:
    """The keystream exactly as research/pvf.md §1B writes it, one word at a time."""
    out = bytearray()
    s = seed
    for i in range(0, len(data), 4):
        t1 = (c.LCG_A * s + magic) & c.MASK32
        s = (c.LCG_A * t1 + magic) & c.MASK32
        ks = ((t1 & 0xFFFF0000) | (s >> 16)).to_bytes(4, "little")
        out += bytes(x ^ k for x, k in zip(data[i : i + 4], ks, strict=False))
    return bytes(out)


def test_key_names_give_the_documented_seeds():
    assert c.legacy_seed(b"HeaD") == 0x76C5D612 and c.legacy_seed(b"BodY") == 0xE5B4DFEE
    assert c.wide_seed("hEAd") == 0x4A454634 and c.wide_seed("bODy") == 0xDD4FF706
    assert c.wide_seed("iNfO") == 0x1AAEB306 and c.wide_seed("mAIn") == 0x961FEB63


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300), st.integers(0, c.MASK32), st.sampled_from([c.MAGIC_DATA, c.MAGIC_POOL]))
def test_vectorised_keystream_equals_the_per_word_definition(data, seed, magic):
    assert c.crypt(data, seed, magic) == _slow_crypt(data, seed, magic)
    assert c.crypt(c.crypt(data, seed, magic), seed, magic) == data


def test_keystream_blocks_join_seamlessly():
    data = os.urandom(4 * 70000 + 3)  # crosses the 65,536-word block boundary
    assert c.crypt(data, 99, c.MAGIC_DATA)[-4000:] == _slow_crypt(data, 99, c.MAGIC_DATA)[-4000:]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, c.MASK32), st.integers(0, 50))
def test_a_known_word_recovers_the_seed(seed, index):
    plain = bytes(4 * index) + (123456).to_bytes(4, "little")
    cipher = c.crypt(plain, seed, c.MAGIC_DATA)
    word = int.from_bytes(cipher[-4:], "little") ^ 123456
    assert seed in seeds_from_word(word, index, c.MAGIC_DATA)


def test_a_zlib_section_recovers_its_seed():
    raw = b"[name]\0`sword`\0" * 300
    cipher = c.crypt(zlib.compress(raw), 0x1BADB002, c.MAGIC_POOL)
    assert recover_zlib_seed(cipher, len(raw), c.MAGIC_POOL) == 0x1BADB002
    assert (
        recover_zlib_seed(cipher, len(raw) + 1, c.MAGIC_POOL) is None
    )  # must inflate to the declared length


def test_archive_under_unknown_keys_opens_as_recovered(tmp_path):
    rng = [0x13572468, 0x2468ACE0, 0x0F1E2D3C, 0x11223344, 0x55667788, 0x99AABBCC]
    scheme = replace(
        c.LEGACY,
        name="unknown",
        header=rng[0],
        hash=rng[1],
        grpi=rng[2],
        pool_a=rng[3],
        pool_w=rng[4],
        body=rng[5],
    )
    path = tmp_path / "unknown.pvf"
    synth_nkpi(path, 80, 3, "legacy", scheme=scheme)
    reference = tmp_path / "known.pvf"
    synth_nkpi(reference, 80, 3, "legacy")
    with open_nkpi(path) as ar, open_nkpi(reference) as ref:
        assert ar.variant == "recovered"
        assert (ar.scheme.header, ar.scheme.hash, ar.scheme.grpi, ar.scheme.body) == (
            rng[0],
            rng[1],
            rng[2],
            rng[5],
        )
        assert (ar.scheme.pool_a, ar.scheme.pool_w) == (rng[3], rng[4])
        assert ar.paths() == ref.paths()
        for p in ar.paths():
            assert ar.read(p) == ref.read(p)
        # and it saves with the same keys
        target = ar.paths()[5]
        ar.stage_text(target, "[name]\n`changed`\n")
        ar.save_copy(tmp_path / "unknown2.pvf")
    with open_nkpi(tmp_path / "unknown2.pvf") as again:
        assert again.variant == "recovered" and again.scheme.body == rng[5]
        assert again.read_text(target) == "[name]\n\t`changed`\n"


def _rsa_pair():
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    nums = key.private_numbers()
    return nums.public_numbers.n, nums.d, nums.public_numbers.e


def _make_sk_dat(page_keys: list[bytes], meta: bytes, n: int, e: int) -> bytes:
    """sk.dat the way research/pvf.md §1B describes it, built with keys the test generated itself."""
    blob = b"".join(page_keys)
    cut = len(blob) & ~0xFF
    wrapped = aes_cbc_encrypt(meta, blob[:cut]) + blob[cut:]
    out = bytearray()
    for i in range(0, len(wrapped), 100):
        part = wrapped[i : i + 100]
        block = b"\x00\x02" + b"\x5a" * (128 - 3 - len(part)) + b"\x00" + part  # PKCS#1 v1.5 type 2
        out += pow(int.from_bytes(block, "big"), e, n).to_bytes(128, "big")
    return bytes(out)


def test_sk_dat_unwraps_to_the_page_keys_and_opens_a_paged_archive(tmp_path):
    n, d, e = _rsa_pair()
    page_keys = [os.urandom(32) for _ in range(9)]
    meta = os.urandom(32)
    sk = tmp_path / "sk.dat"
    sk.write_bytes(_make_sk_dat(page_keys, meta, n, e))
    assert unwrap_sk_dat(sk.read_bytes(), n, d, meta) == tuple(page_keys)
    keyfile = tmp_path / "keys.json"
    keyfile.write_text(
        json.dumps(
            {
                "sk_dat": "sk.dat",
                "rsa_modulus": hex(n),
                "rsa_private_exponent": str(d),
                "metadata_key": meta.hex(),
            }
        )
    )
    keys = load_keys(key_file=keyfile)
    assert "page_keys" not in repr(keys) or keys.page_keys[0].hex() not in repr(keys)  # never printed
    path = tmp_path / "paged.pvf"
    synth_nkpi(path, 60, 4, "paged", keys=keys)
    with open_nkpi(path, keys=keyfile) as ar:
        assert ar.variant == "paged"
        assert ar.read_text(ar.paths()[3]).startswith("[name]")
    with pytest.raises(BridgeError) as err:
        load_keys(sk_dat=sk, rsa_modulus=n)
    assert err.value.code is ErrorCode.KEY_REQUIRED


def test_page_guards_on_every_page_survive_edit_and_save(tmp_path, monkeypatch):
    """With 16 KiB pages a small archive spans many pages, so reads and saves cross guard boundaries."""
    from deskbridge.kinds.pvf.archive import nkpi, nkpi_paged, nkpi_writer
    from deskbridge.kinds.pvf.synth import nkpi as synth

    for module in (nkpi, nkpi_paged, nkpi_writer, synth):
        if hasattr(module, "PAGE_SIZE"):
            monkeypatch.setattr(module, "PAGE_SIZE", 0x4000)
    path = tmp_path / "many-pages.pvf"
    summary = synth_nkpi(path, 400, 8, "paged")
    assert summary["size"] > 5 * 0x4000
    keyfile = str(path) + ".keys.json"
    with open_nkpi(path, keys=keyfile) as ar:
        texts = {p: ar.read_text(p) for p in ar.paths()}
        target = ar.paths()[-30]
        ar.stage_text(target, texts[target].replace("[name]\n\t`", "[name]\n\t`X", 1))
        ar.stage_text("etc/added.etc", "[name]\n`added`\n")
        ar.save()
    with open_nkpi(path, keys=keyfile) as again:
        for p, text in texts.items():
            if p != target:
                assert again.read_text(p) == text
        assert again.read_text(target).startswith("[name]\n\t`X")
        assert again.read_text("etc/added.etc") == "[name]\n\t`added`\n"


def test_growing_past_the_last_page_key_fails_cleanly(tmp_path, monkeypatch):
    from deskbridge.kinds.pvf.archive import nkpi, nkpi_paged, nkpi_writer
    from deskbridge.kinds.pvf.synth import nkpi as synth

    for module in (nkpi, nkpi_paged, nkpi_writer, synth):
        if hasattr(module, "PAGE_SIZE"):
            monkeypatch.setattr(module, "PAGE_SIZE", 0x4000)
    path = tmp_path / "tight.pvf"
    synth_nkpi(path, 40, 9, "paged")
    before = path.read_bytes()
    keyfile = str(path) + ".keys.json"
    with open_nkpi(path, keys=keyfile) as ar:
        ar.stage("etc/big.etc", os.urandom(200_000))  # incompressible: needs pages nobody has keys for
        with pytest.raises(BridgeError) as err:
            ar.save()
        assert err.value.code is ErrorCode.KEY_REQUIRED
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".deskbridge-tmp")] == []


def test_paged_archive_with_unknown_section_keys_is_recovered(tmp_path):
    scheme = replace(c.PAGED, header=0x0BADCAFE, hash=0x1234ABCD, grpi=0x0F0F0F0F, body=0x7777AAAA)
    path = tmp_path / "other-client.pvf"
    synth_nkpi(path, 50, 6, "paged", scheme=scheme)
    with open_nkpi(path, keys=str(path) + ".keys.json") as ar:
        assert ar.variant == "paged"
        assert (ar.scheme.header, ar.scheme.hash, ar.scheme.grpi, ar.scheme.body) == (
            0x0BADCAFE,
            0x1234ABCD,
            0x0F0F0F0F,
            0x7777AAAA,
        )
        assert ar.read_text(ar.paths()[2]).startswith("[name]")


def test_cli_opens_a_paged_archive_with_sk_dat_options_and_names_them_when_keys_are_missing(tmp_path):
    from typer.testing import CliRunner

    from deskbridge.cli import app

    runner = CliRunner()
    n, d, e = _rsa_pair()
    page_keys = [os.urandom(32) for _ in range(9)]
    meta = os.urandom(32)
    sk = tmp_path / "sk.dat"
    sk.write_bytes(_make_sk_dat(page_keys, meta, n, e))
    path = tmp_path / "paged.pvf"
    synth_nkpi(path, 60, 4, "paged", keys=load_keys(page_keys_hex=[k.hex() for k in page_keys]))
    with open_nkpi(path, keys={"page_keys_hex": [k.hex() for k in page_keys]}) as ar:
        script = ar.paths()[3]

    bare = runner.invoke(app, ["pvf", "info", str(path)])
    assert bare.exit_code == 2 and "KEY_REQUIRED" in bare.output
    for option in (
        "--keys FILE",
        "--sk-dat PATH",
        "--rsa-modulus HEX",
        "--rsa-private-exponent HEX",
        "--metadata-key HEX",
    ):
        assert option in bare.output

    options = [
        "--sk-dat",
        str(sk),
        "--rsa-modulus",
        f"{n:x}",
        "--rsa-private-exponent",
        hex(d),
        "--metadata-key",
        meta.hex(),
    ]
    info = runner.invoke(app, ["pvf", "info", str(path), "--json", *options])
    assert info.exit_code == 0, info.output
    assert json.loads(info.output)["variant"] == "paged"
    listed = runner.invoke(app, ["pvf", "ls", str(path), *options])
    assert listed.exit_code == 0 and script in listed.output
    text = runner.invoke(app, ["pvf", "cat", str(path), script, *options])
    assert text.exit_code == 0 and text.output.startswith("[name]")
    checked = runner.invoke(app, ["pvf", "verify", str(path), "-q", *options])
    assert checked.exit_code == 0, checked.output
    extracted = runner.invoke(
        app, ["pvf", "extract", str(path), "-o", str(tmp_path / "tree"), "-q", *options]
    )
    assert extracted.exit_code == 0 and (tmp_path / "tree" / script).exists()

    half = runner.invoke(app, ["pvf", "info", str(path), "--sk-dat", str(sk), "--rsa-modulus", f"{n:x}"])
    assert half.exit_code == 2 and "KEY_REQUIRED" in half.output and "--metadata-key HEX" in half.output
    wrong = runner.invoke(app, ["pvf", "info", str(path), *options[:3], "not-hex", *options[4:]])
    assert wrong.exit_code == 2 and "--rsa-modulus must be a hex number" in wrong.output


def test_cli_synth_paged_says_where_the_test_keys_are(tmp_path):
    from typer.testing import CliRunner

    from deskbridge.cli import app

    runner = CliRunner()
    path = tmp_path / "paged.pvf"
    made = runner.invoke(
        app, ["pvf", "synth", "--family", "nkpi", "--variant", "paged", "--files", "60", "-o", str(path)]
    )
    assert made.exit_code == 0, made.output
    key_file = tmp_path / "paged.pvf.keys.json"
    assert f"test page keys to {key_file}" in made.output
    opened = runner.invoke(app, ["pvf", "info", str(path), "--keys", str(key_file)])
    assert opened.exit_code == 0 and "variant: paged" in opened.output


def test_cli_keys_of_another_build_are_named_as_the_problem(tmp_path):
    # The hint was UNSUPPORTED_VARIANT's generic "check the family and variant named in the message", which
    # sends a modder looking at the wrong thing.
    from typer.testing import CliRunner

    from deskbridge.cli import app

    runner = CliRunner()
    for seed in ("1", "2"):
        made = runner.invoke(
            app,
            [
                "pvf",
                "synth",
                "--family",
                "nkpi",
                "--variant",
                "paged",
                "--files",
                "60",
                "--seed",
                seed,
                "-o",
                str(tmp_path / f"p{seed}.pvf"),
            ],
        )
        assert made.exit_code == 0, made.output
    res = runner.invoke(
        app, ["pvf", "info", str(tmp_path / "p1.pvf"), "--keys", str(tmp_path / "p2.pvf.keys.json")]
    )
    assert res.exit_code == 2
    assert "do not decrypt" in res.output and "key material of the client build" in res.output, res.output
    assert "check the family and variant" not in res.output
