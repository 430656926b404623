"""`pvf get/set/add/rm`: one-file edits through the guarded writer (identity check, backup, verify), and
`pack` refusing to overwrite; a modder's price change without extract + pack."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from deskbridge.cli import app
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.archive import ArchiveBase, open_archive
from deskbridge.kinds.pvf.synth.classic import synth_classic
from deskbridge.kinds.pvf.synth.nkpi import synth_nkpi

runner = CliRunner()


@pytest.fixture
def classic(tmp_path):
    path = tmp_path / "Script.pvf"
    synth_classic(path, 60, seed=7)
    return path


def _an_equ(path):
    return next(p for p in open_archive(path).paths() if p.endswith(".equ"))


def test_get_edit_set_changes_one_file_keeps_a_backup_and_verifies(classic, tmp_path):
    before = classic.read_bytes()
    path = _an_equ(classic)
    text_file = tmp_path / "item.equ"
    assert runner.invoke(app, ["pvf", "get", str(classic), path, "-o", str(text_file)]).exit_code == 0
    text = text_file.read_text(encoding="utf-8")
    assert text.startswith("#PVF_File")
    text_file.write_text(text + "\n[price]\n\t12345\n", encoding="utf-8")
    res = runner.invoke(app, ["pvf", "set", str(classic), path, str(text_file)])
    assert res.exit_code == 0, res.output
    assert "1 verified" in res.output and "backup" in res.output
    assert (tmp_path / "Script.pvf.bak").read_bytes() == before
    again = open_archive(classic)
    assert "[price]\n\t12345" in again.read_text(path)
    others = [p for p in again.paths() if p != path]
    old = open_archive(tmp_path / "Script.pvf.bak")
    assert all(again.read(p) == old.read(p) for p in others if p != "stringtable.bin")


def test_set_reads_stdin_and_raw_bytes(classic):
    res = runner.invoke(
        app, ["pvf", "set", "--raw", "--no-backup", str(classic), "n_string.lst", "-"], input="x"
    )
    assert res.exit_code == 0, res.output
    assert open_archive(classic).read("n_string.lst") == b"x"
    assert not classic.with_name("Script.pvf.bak").exists()


def test_set_into_a_copy_leaves_the_archive_alone_and_refuses_an_existing_copy(classic, tmp_path):
    before = classic.read_bytes()
    src = tmp_path / "new.txt"
    src.write_bytes(b"hello")
    copy = tmp_path / "copy.pvf"
    args = ["pvf", "set", "--raw", str(classic), "n_string.lst", str(src), "-o", str(copy)]
    assert runner.invoke(app, args).exit_code == 0
    assert classic.read_bytes() == before and open_archive(copy).read("n_string.lst") == b"hello"
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "TARGET_EXISTS" in res.output and "--force" in res.output
    assert runner.invoke(app, [*args, "--force"]).exit_code == 0


def test_add_and_rm(classic, tmp_path):
    src = tmp_path / "new.equ"
    src.write_text("#PVF_File\n[name]\n\t`新劍`\n", encoding="utf-8")
    res = runner.invoke(app, ["pvf", "add", str(classic), "Equipment/New.equ", str(src)])
    assert res.exit_code == 0, res.output
    ar = open_archive(classic)
    assert "equipment/new.equ" in ar.paths() and "新劍" in ar.read_text("equipment/new.equ")
    res = runner.invoke(app, ["pvf", "add", str(classic), "EQUIPMENT/new.EQU", str(src)])
    assert res.exit_code == 2 and "TARGET_EXISTS" in res.output and "pvf set" in res.output
    res = runner.invoke(app, ["pvf", "rm", str(classic), "equipment/new.equ", "no/such.equ"])
    assert res.exit_code == 2 and "NOT_FOUND" in res.output and "nothing was deleted" in res.output
    assert open_archive(classic).exists("equipment/new.equ")
    assert runner.invoke(app, ["pvf", "rm", str(classic), "equipment/new.equ"]).exit_code == 0
    assert not open_archive(classic).exists("equipment/new.equ")


def test_set_of_a_missing_file_points_to_add(classic, tmp_path):
    src = tmp_path / "x"
    src.write_bytes(b"x")
    res = runner.invoke(app, ["pvf", "set", "--raw", str(classic), "no/such.equ", str(src)])
    assert res.exit_code == 2 and "NOT_FOUND" in res.output and "pvf add" in res.output


def test_set_on_an_nkpi_archive(tmp_path):
    path = tmp_path / "n.pvf"
    synth_nkpi(path, 40, 2, "legacy")
    target = next(p for p in open_archive(path).paths() if p.endswith(".equ"))
    src = tmp_path / "t.equ"
    src.write_text("[name]\n`changed`\n", encoding="utf-8")
    assert runner.invoke(app, ["pvf", "set", str(path), target, str(src)]).exit_code == 0
    assert "`changed`" in open_archive(path).read_text(target)


def test_a_change_on_disk_during_the_edit_is_source_changed_and_nothing_is_written(classic, monkeypatch):
    path = _an_equ(classic)
    original = ArchiveBase._verify_written

    def meddle(self, tmp, expected):  # another program writes the archive while we save it
        with open(classic, "r+b") as f:
            f.seek(100)
            f.write(b"\xff")
        return original(self, tmp, expected)

    monkeypatch.setattr(ArchiveBase, "_verify_written", meddle)
    ar = open_archive(classic)
    ar.stage(path, b"\xb0\xd0")
    monkeypatch.setattr(type(ar), "_verify_written", meddle)
    with pytest.raises(BridgeError) as err:
        ar.save()
    assert err.value.code == ErrorCode.SOURCE_CHANGED
    assert classic.read_bytes()[100] == 0xFF  # the other program's write is what is on disk
    assert not list(classic.parent.glob(".deskbridge-tmp-*"))


def test_the_cli_refuses_when_the_archive_changed_since_it_was_opened(classic, tmp_path, monkeypatch):
    import deskbridge.kinds.pvf.cli as pvf_cli

    real_open = pvf_cli._open

    def open_then_meddle(*a, **kw):
        ar = real_open(*a, **kw)
        data = bytearray(classic.read_bytes())
        data[-1] ^= 1  # same size, new content
        classic.write_bytes(bytes(data))
        return ar

    monkeypatch.setattr(pvf_cli, "_open", open_then_meddle)
    src = tmp_path / "x"
    src.write_bytes(b"x")
    res = runner.invoke(app, ["pvf", "set", "--raw", str(classic), "n_string.lst", str(src)])
    assert res.exit_code == 2 and "SOURCE_CHANGED" in res.output, res.output


def test_pack_refuses_an_existing_target_without_force(classic, tmp_path):
    tree = tmp_path / "tree"
    assert runner.invoke(app, ["pvf", "extract", str(classic), "-o", str(tree)]).exit_code == 0
    out = tmp_path / "out.pvf"
    out.write_bytes(b"precious")
    res = runner.invoke(app, ["pvf", "pack", str(tree), "-o", str(out)])
    assert res.exit_code == 2 and "TARGET_EXISTS" in res.output and out.read_bytes() == b"precious"
    assert runner.invoke(app, ["pvf", "pack", str(tree), "-o", str(out), "--force"]).exit_code == 0
    assert open_archive(out).paths()


def test_help_shows_the_workflows():
    res = runner.invoke(app, ["pvf", "--help"])
    assert "pvf set Script.pvf" in res.output and "pvf extract Script.pvf -o tree/" in res.output
    for cmd in ("get", "set", "add", "rm"):
        assert "Example" in runner.invoke(app, ["pvf", cmd, "--help"]).output


def test_in_place_edits_go_into_the_version_history(classic, tmp_path, deskbridge_home):
    # docs/pvf-workspace.md: "Every save records a commit — source (UI, MCP, CLI)"; `pvf set/add/rm` recorded
    # nothing, so `pvf log` said "no history" right after a CLI edit.
    from deskbridge.kinds.pvf.history import Journal
    from deskbridge.settings import deskbridge_dirs

    path = _an_equ(classic)
    original = open_archive(classic).read(path)
    text_file = tmp_path / "item.equ"
    assert runner.invoke(app, ["pvf", "get", str(classic), path, "-o", str(text_file)]).exit_code == 0
    text_file.write_text(text_file.read_text(encoding="utf-8") + "\n[price]\n\t777\n", encoding="utf-8")
    assert runner.invoke(app, ["pvf", "set", str(classic), path, str(text_file)]).exit_code == 0
    assert (
        runner.invoke(app, ["pvf", "add", str(classic), "etc/Added.txt", str(text_file), "--raw"]).exit_code
        == 0
    )
    assert runner.invoke(app, ["pvf", "rm", str(classic), "etc/added.txt"]).exit_code == 0
    copy = tmp_path / "copy.pvf"
    assert runner.invoke(app, ["pvf", "rm", str(classic), path, "-o", str(copy)]).exit_code == 0

    log = runner.invoke(app, ["pvf", "log", str(classic)])
    assert log.exit_code == 0 and "no history" not in log.output, log.output
    commits = Journal(deskbridge_dirs().data, classic.resolve()).list()
    assert [c["source"] for c in commits] == ["cli"] * 3  # the -o copy is not a change of this archive
    assert [(f["action"], f["path"]) for f in commits[0]["files"]] == [("modify", path)]
    assert [(f["action"], f["path"]) for f in commits[1]["files"]] == [("add", "etc/added.txt")]
    assert [(f["action"], f["path"]) for f in commits[2]["files"]] == [("delete", "etc/added.txt")]
    journal = Journal(deskbridge_dirs().data, classic.resolve())
    assert journal.blob(commits[0]["files"][0]["before"]) == original
    assert journal.blob(commits[0]["files"][0]["after"]) == open_archive(classic).read(path)


def test_ctrl_c_during_an_in_place_save_says_the_archive_is_unchanged(classic, tmp_path, monkeypatch):
    # It ended silently with 130; the modder could not tell whether Script.pvf was the old or a broken one.
    before = classic.read_bytes()
    path = _an_equ(classic)
    text_file = tmp_path / "item.equ"
    assert runner.invoke(app, ["pvf", "get", str(classic), path, "-o", str(text_file)]).exit_code == 0
    text_file.write_text(text_file.read_text(encoding="utf-8") + "\n[price]\n\t1\n", encoding="utf-8")

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ArchiveBase, "save", interrupted)
    res = runner.invoke(app, ["pvf", "set", str(classic), path, str(text_file)])
    assert res.exit_code == 130, res.output
    assert f"interrupted: {classic} is unchanged" in res.output
    assert classic.read_bytes() == before


def test_set_of_the_same_content_writes_nothing_and_keeps_the_backup(classic, tmp_path):
    before = classic.read_bytes()
    path = _an_equ(classic)
    text_file = tmp_path / "item.equ"
    assert runner.invoke(app, ["pvf", "get", str(classic), path, "-o", str(text_file)]).exit_code == 0
    text = text_file.read_text(encoding="utf-8")
    text_file.write_text(text + "\n[price]\n\t777\n", encoding="utf-8")
    assert runner.invoke(app, ["pvf", "set", str(classic), path, str(text_file)]).exit_code == 0
    changed = classic.read_bytes()
    assert (tmp_path / "Script.pvf.bak").read_bytes() == before
    # set again, unedited: ARCHIVE.bak still holds the archive before the real change
    res = runner.invoke(app, ["pvf", "set", str(classic), path, str(text_file)])
    assert res.exit_code == 0, res.output
    assert "nothing changed" in res.output and "nothing was written" in res.output
    assert classic.read_bytes() == changed
    assert (tmp_path / "Script.pvf.bak").read_bytes() == before


def _hold_the_lock(archive, owner):
    """Another process holding `archive`'s workspace lock as `owner` (serve, mcp or another cli command)."""
    import subprocess
    import sys

    code = (
        "import sys; from deskbridge.integrations.endpoints import WorkspaceLock; "
        f"WorkspaceLock(sys.argv[1], {owner!r}).acquire(); print('held', flush=True); sys.stdin.read()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(archive)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.parametrize(
    ("owner", "said"),
    [
        ("serve", "open in deskbridge serve"),
        ("mcp", "`deskbridge mcp`"),
        ("cli", "another deskbridge command"),
    ],
)
def test_set_refuses_an_archive_a_session_or_another_command_holds(classic, tmp_path, owner, said):
    """`pvf set` used to write an archive that `serve` had open (that session kept showing the old files and its
    next save was refused), and two `pvf set` at once could both pass the identity check before the rename."""
    before = classic.read_bytes()
    path = _an_equ(classic)
    text_file = tmp_path / "item.equ"
    assert runner.invoke(app, ["pvf", "get", str(classic), path, "-o", str(text_file)]).exit_code == 0
    text_file.write_text(text_file.read_text(encoding="utf-8") + "\n[price]\n\t777\n", encoding="utf-8")
    holder = _hold_the_lock(classic, owner)
    try:
        res = runner.invoke(app, ["pvf", "set", str(classic), path, str(text_file)])
        assert res.exit_code == 2, res.output
        assert said in res.output and "nothing was written" in res.output, res.output
        assert classic.read_bytes() == before and not classic.with_name("Script.pvf.bak").exists()
        # a copy with -o does not touch the archive, so it is not refused
        copy = tmp_path / "copy.pvf"
        assert (
            runner.invoke(app, ["pvf", "set", str(classic), path, str(text_file), "-o", str(copy)]).exit_code
            == 0
        )
    finally:
        holder.communicate("")
    res = runner.invoke(app, ["pvf", "set", str(classic), path, str(text_file)])
    assert res.exit_code == 0, res.output
    assert "[price]\n\t777" in open_archive(classic).read_text(path)
    # and this command let go of the lock: a serve could now take the archive
    _hold_the_lock(classic, "serve").communicate("")


def test_serve_started_while_a_command_writes_says_so(classic):
    from deskbridge.integrations.endpoints import claim_workspace

    holder = _hold_the_lock(classic, "cli")
    try:
        with pytest.raises(BridgeError) as refused:
            claim_workspace(classic)
        assert refused.value.code is ErrorCode.NOT_READY and "is writing" in refused.value.message
    finally:
        holder.communicate("")


def test_a_text_saved_in_the_packs_code_page_is_named_and_raw_is_not_offered_for_it(tmp_path):
    """An editor that opened `pvf get`'s text as Big5 saves Big5; the hint offered --raw, which stores that text
    as the compiled script itself."""
    archive = tmp_path / "Script.pvf"
    synth_classic(archive, 60, seed=7)  # Windows code page 950 (tw)
    path = _an_equ(archive)
    text = runner.invoke(app, ["pvf", "get", str(archive), path]).output
    edited = tmp_path / "item.equ"
    edited.write_bytes((text + "\n[name2]\n\t`騎士長劍`\n").encode("cp950"))
    res = runner.invoke(app, ["pvf", "set", str(archive), path, str(edited)])
    assert res.exit_code == 2, res.output
    assert "windows-950" in res.output and "save it with UTF-8" in res.output, res.output
    assert "or pass --raw" not in res.output and "never compiled" in res.output, res.output


def test_ctrl_c_during_pack_says_what_is_on_disk(classic, tmp_path, monkeypatch):
    # It ended silently with 130: was Script.new.pvf half written, or the old one still there?
    import deskbridge.kinds.pvf.tree as tree

    folder = tmp_path / "tree"
    assert runner.invoke(app, ["pvf", "extract", str(classic), "-o", str(folder)]).exit_code == 0

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tree, "pack_tree", interrupted)
    out = tmp_path / "Script.new.pvf"
    res = runner.invoke(app, ["pvf", "pack", str(folder), "-o", str(out)])
    assert res.exit_code == 130 and "interrupted: nothing was written" in res.output, res.output
    out.write_bytes(classic.read_bytes())
    res = runner.invoke(app, ["pvf", "pack", str(folder), "-o", str(out), "--force"])
    assert res.exit_code == 130 and f"interrupted: {out} is unchanged" in res.output, res.output


def test_set_with_an_unwritable_state_folder_says_so_without_a_traceback(classic, tmp_path, monkeypatch):
    before = classic.read_bytes()
    path = _an_equ(classic)
    text_file = tmp_path / "item.equ"
    assert runner.invoke(app, ["pvf", "get", str(classic), path, "-o", str(text_file)]).exit_code == 0
    text_file.write_text(text_file.read_text(encoding="utf-8") + "\n[price]\n\t5\n", encoding="utf-8")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x", "utf-8")
    monkeypatch.setenv("DESKBRIDGE_HOME", str(blocker))  # its state/ folder cannot be made
    res = runner.invoke(app, ["pvf", "set", str(classic), path, str(text_file)])
    assert res.exit_code == 2 and "cannot take the lock" in res.output and "-o NEW.pvf" in res.output, (
        res.output
    )
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert classic.read_bytes() == before


@pytest.mark.parametrize("command", ["set", "pack"])
def test_force_over_an_archive_a_session_holds_is_refused(classic, tmp_path, command):
    """`pvf set -o X --force` and `pvf pack -o X --force` replaced an archive X that a serve had open, taking no
    lock (found by QA): that session kept the old files and its next save was refused."""
    served = tmp_path / "served.pvf"
    served.write_bytes(classic.read_bytes())
    before = served.read_bytes()
    path = _an_equ(classic)
    text_file = tmp_path / "item.equ"
    assert runner.invoke(app, ["pvf", "get", str(classic), path, "-o", str(text_file)]).exit_code == 0
    text_file.write_text(text_file.read_text(encoding="utf-8") + "\n[price]\n\t778\n", encoding="utf-8")
    if command == "set":
        args = ["pvf", "set", str(classic), path, str(text_file), "-o", str(served), "--force"]
    else:
        tree_dir = tmp_path / "tree"
        assert runner.invoke(app, ["pvf", "extract", str(classic), "-o", str(tree_dir), "-q"]).exit_code == 0
        args = ["pvf", "pack", str(tree_dir), "-o", str(served), "--force", "-q"]
    holder = _hold_the_lock(served, "serve")
    try:
        res = runner.invoke(app, args)
        assert res.exit_code == 2, res.output
        assert "open in deskbridge serve" in res.output and "nothing was written" in res.output, res.output
        assert served.read_bytes() == before
    finally:
        holder.communicate("")
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    _hold_the_lock(served, "serve").communicate("")  # and the command let go of the lock
