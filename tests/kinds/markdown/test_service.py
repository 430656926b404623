"""The service as the browser and an AI client use it: open, read, edit with checks, approve, save, reopen."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.events import EventBus
from deskbridge.core.tools import CallContext
from deskbridge.kinds.markdown.collab import Edit
from deskbridge.kinds.markdown.service import MarkdownService

AI = CallContext(caller="mcp:s1", client_name="Claude")


class Person:
    """An approval broker that answers like a person and remembers what they were shown."""

    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.seen = []

    async def require(self, req, elicit=None):
        self.seen.append(req)
        if not self.answer:
            raise BridgeError(ErrorCode.APPROVAL_DECLINED, "declined")


class Bus:
    def __init__(self) -> None:
        self.events = []

    def publish(self, topic, data):
        self.events.append((topic, data))


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    (tmp_path / "notes.md").write_text("# Notes\r\n\r\nHello world\r\n", encoding="utf-8", newline="")
    (tmp_path / "other.md").write_text("# Other\n", encoding="utf-8")
    return tmp_path


def run(coro):
    return asyncio.run(coro)


def test_open_edit_save_keeps_the_files_line_endings(notes):
    person, bus = Person(), Bus()
    svc = MarkdownService(notes / "notes.md", policy=person, events=bus)
    doc = svc.read()
    assert doc["text"] == "# Notes\n\nHello world\n"
    at = doc["text"].index("world")
    res = run(
        svc.apply_edits(
            None,
            [Edit(at, at + 5, "there")],
            ctx=AI,
            tool="md_apply_text_edit",
            base_version=doc["version"],
            summary="greet",
        )
    )
    assert res["dirty"] and res["currentLength"] == res["previousLength"]
    assert "-Hello world" in person.seen[0].diff and "+Hello there" in person.seen[0].diff
    assert any(t == "doc" and e["type"] == "update" for t, e in bus.events)
    run(svc.save(ctx=AI, tool="md_save"))
    assert (notes / "notes.md").read_bytes() == b"# Notes\r\n\r\nHello there\r\n"
    assert not svc.read()["dirty"]


def test_declined_edit_changes_nothing(notes):
    svc = MarkdownService(notes / "notes.md", policy=Person(answer=False))
    with pytest.raises(BridgeError) as err:
        run(svc.apply_edits(None, [Edit(0, 1, "X")], ctx=AI, tool="t", base_version=0, summary=""))
    assert err.value.code is ErrorCode.APPROVAL_DECLINED
    assert svc.read()["text"].startswith("# Notes")


def test_edit_from_an_old_revision_is_rebased_over_typing_elsewhere(notes):
    svc = MarkdownService(notes / "notes.md", approval_settings={"enabled": False})
    text = svc.read()["text"]
    at = text.index("Hello")
    # the person types at the top meanwhile (UTF-16 JSON from the browser)
    assert svc.push("d1", 0, [{"clientID": "tab", "changes": [[0, "Intro "], len(text)]}])["ok"]
    run(svc.apply_edits(None, [Edit(at, at + 5, "Bye")], ctx=AI, tool="t", base_version=0, summary=""))
    assert svc.read()["text"] == "Intro # Notes\n\nBye world\n"


def test_edit_of_text_the_person_changed_meanwhile_is_refused_with_context(notes):
    svc = MarkdownService(notes / "notes.md", approval_settings={"enabled": False})
    text = svc.read()["text"]
    at = text.index("Hello")
    svc.push("d1", 0, [{"clientID": "tab", "changes": [at + 1, [1, "E"], len(text) - at - 2]}])
    with pytest.raises(BridgeError) as err:
        run(svc.apply_edits(None, [Edit(at, at + 5, "Bye")], ctx=AI, tool="t", base_version=0, summary=""))
    assert err.value.code is ErrorCode.STALE_WORKSPACE
    assert err.value.data["currentText"] == "HEllo"


def test_save_refuses_to_overwrite_a_file_changed_by_another_program(notes):
    svc = MarkdownService(notes / "notes.md", approval_settings={"enabled": False})
    run(svc.apply_edits(None, [Edit(0, 0, "x")], tool="t", base_version=0, summary=""))
    (notes / "notes.md").write_text("changed elsewhere\n", encoding="utf-8")
    with pytest.raises(BridgeError) as err:
        run(svc.save())
    assert err.value.code is ErrorCode.SOURCE_CHANGED
    assert (notes / "notes.md").read_text() == "changed elsewhere\n"
    assert svc.read()["externalChange"]
    run(svc.reload_from_disk("d1"))
    assert svc.read()["text"] == "changed elsewhere\n" and not svc.read()["dirty"]


def test_save_of_a_file_renamed_away_says_so_and_keep_mine_writes_it_again(notes):
    svc = MarkdownService(notes / "notes.md", approval_settings={"enabled": False})
    run(svc.apply_edits(None, [Edit(0, 0, "x")], tool="t", base_version=0, summary=""))
    (notes / "notes.md").rename(notes / "moved.md")
    with pytest.raises(BridgeError) as err:
        run(svc.save())
    assert err.value.code is ErrorCode.SOURCE_CHANGED
    assert "renamed or deleted" in err.value.message and err.value.data["deleted"] is True
    assert "Keep mine" in err.value.hint and "md_save_current_document_as" in err.value.hint
    assert svc.read()["externalChange"]
    assert not (notes / "notes.md").exists()
    run(svc.resolve_external(None, "keep"))
    run(svc.save())
    assert (notes / "notes.md").read_text(encoding="utf-8") == svc.read()["text"]
    assert svc.read()["text"].startswith("x")


def test_paths_outside_the_scope_and_unc_are_refused(notes, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "secret.md"
    outside.write_text("secret")
    svc = MarkdownService(notes, policy=Person(answer=False))
    for raw in ("../" + outside.parent.name + "/secret.md", str(outside)):
        with pytest.raises(BridgeError) as err:
            run(svc.open(raw, ctx=AI))
        assert err.value.code in (ErrorCode.APPROVAL_DECLINED, ErrorCode.ACCESS_DENIED)
    with pytest.raises(BridgeError) as err:
        run(svc.open("//server/share/x.md", ctx=AI))
    assert err.value.code is ErrorCode.ACCESS_DENIED
    with pytest.raises(BridgeError) as err:
        run(svc.open("notes.exe", ctx=AI))
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert run(svc.open("other.md", ctx=AI))["fileName"] == "other.md"


def test_save_as_never_overwrites_silently(notes):
    svc = MarkdownService(notes, policy=Person())
    run(svc.open("notes.md"))
    with pytest.raises(BridgeError) as err:
        run(svc.save_as(None, "other.md", ctx=AI))
    assert err.value.code is ErrorCode.TARGET_EXISTS
    res = run(svc.save_as(None, "copy.md", ctx=AI))
    assert res["fileName"] == "copy.md" and (notes / "copy.md").exists()


def test_close_with_unsaved_changes_needs_discard(notes):
    svc = MarkdownService(notes / "notes.md")
    run(svc.apply_edits(None, [Edit(0, 0, "x")], tool="t", base_version=0, summary=""))
    with pytest.raises(BridgeError) as err:
        run(svc.close())
    assert err.value.code is ErrorCode.UNSAVED_CHANGES
    assert run(svc.close(discard=True))["closed"]


def test_unsynced_browser_drafts_block_save_until_flushed(notes):
    """The core draft barrier: a registered editor is asked; a draft refuses, a clean answer lets the save go."""
    bus = EventBus()
    svc = MarkdownService(notes / "notes.md", events=bus)
    svc.drafts.register("tab")

    async def scenario(has_drafts: bool):
        sub = bus.subscribe("ui")
        save = asyncio.create_task(svc.save())
        prepare = await sub.get(timeout=5)
        assert prepare.data["event"] == "prepare" and prepare.data["docId"] == "d1"
        svc.drafts.ack(prepare.data["operationId"], "tab", has_drafts)
        return await save

    with pytest.raises(BridgeError) as err:
        run(scenario(True))
    assert err.value.code is ErrorCode.UI_DRAFT_PENDING
    assert run(scenario(False))["dirty"] is False
    svc.drafts.timeout_s = 0.05
    with pytest.raises(BridgeError) as err:
        run(svc.save())  # nobody answers: refused, never passed on silence
    assert err.value.code is ErrorCode.UI_NOT_READY


def test_selection_follows_later_edits(notes):
    svc = MarkdownService(notes / "notes.md")
    text = svc.read()["text"]
    at = text.index("world")
    svc.report_selection("d1", at, at + 5)
    svc.push("d1", 1 - 1, [{"clientID": "tab", "changes": [[0, "😀"], len(text)]}])
    sel = svc.selection()
    assert sel["text"] == "world" and sel["startOffset"] == at + 1


def test_external_change_is_detected_and_announced_once(notes):
    bus = Bus()
    svc = MarkdownService(notes / "notes.md", events=bus)
    assert svc.check_external_changes() == []
    import os

    os.utime(notes / "notes.md", ns=(1, 1))  # touched, same bytes: not a change
    assert svc.check_external_changes() == []
    (notes / "notes.md").write_text("new text\n", encoding="utf-8")
    assert svc.check_external_changes() == ["d1"]
    assert svc.check_external_changes() == []
    assert [e for t, e in bus.events if e.get("type") == "external-change"]
    run(svc.keep_local("d1"))
    run(svc.save())
    assert (notes / "notes.md").read_bytes() == b"# Notes\r\n\r\nHello world\r\n"


def test_save_as_cannot_escape_the_folder(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n", encoding="utf-8")
    evil = tmp_path / "notes-evil"
    evil.mkdir()
    (notes / "link").symlink_to(evil, target_is_directory=True)
    svc = MarkdownService(notes / "a.md", approval_settings={"enabled": False})
    for target in (
        "../notes-evil/x.md",
        "link/x.md",
        str(evil / "x.md"),
        "x.md\x00.txt",
        "a" * 5000 + ".md",
        "\\\\server\\share\\x.md",
    ):
        with pytest.raises(BridgeError) as err:
            run(svc.save_as(None, target, ctx=AI))
        assert err.value.code in (ErrorCode.ACCESS_DENIED, ErrorCode.INVALID_ARGUMENT), target
    assert list(evil.iterdir()) == []


def test_current_document_scope_allows_only_that_file(notes):
    svc = MarkdownService(notes / "notes.md", scope="CurrentDocument", approval_settings={"enabled": False})
    with pytest.raises(BridgeError) as err:
        run(svc.open("other.md", ctx=AI))
    assert err.value.code is ErrorCode.ACCESS_DENIED
    assert [p.name for p in svc.workspace.iter_documents()] == ["notes.md"]


def test_utf16_and_bom_files_round_trip(tmp_path):
    (tmp_path / "w.md").write_bytes("# 标题\r\nText\r\n".encode("utf-16"))
    (tmp_path / "b.md").write_bytes(b"\xef\xbb\xbf# BOM\n")
    svc = MarkdownService(tmp_path, approval_settings={"enabled": False})
    for name in ("w.md", "b.md"):
        doc = run(svc.open(name))
        assert "\r" not in svc.read(doc["docId"])["text"]
        before = (tmp_path / name).read_bytes()
        run(svc.apply_edits(doc["docId"], [Edit(0, 0, "x")], base_version=0))
        run(svc.apply_edits(doc["docId"], [Edit(0, 1, "")], base_version=1))
        run(svc.save(doc["docId"]))
        assert (tmp_path / name).read_bytes() == before


def test_save_keeps_each_lines_own_ending_in_a_file_of_mixed_endings(tmp_path):
    # Two CRLF lines, then LF ones (a file pasted together from two systems): the majority is LF, yet the
    # untouched CRLF lines must come back as CRLF, an edited line keeps its ending and a new line takes its
    # neighbour's.
    (tmp_path / "mixed.md").write_bytes(b"# Title\r\nfrom windows\r\n\nalpha\nbeta\ngamma\n")
    svc = MarkdownService(tmp_path / "mixed.md", approval_settings={"enabled": False})
    text = svc.read()["text"]
    assert text == "# Title\nfrom windows\n\nalpha\nbeta\ngamma\n"
    windows, beta = text.index("windows"), text.index("beta")
    edits = [Edit(windows, windows + 7, "windows\nand more"), Edit(beta, beta + 4, "BETA")]
    run(svc.apply_edits(None, edits, tool="t", base_version=0, summary=""))
    run(svc.save())
    saved = b"# Title\r\nfrom windows\r\nand more\r\n\nalpha\nBETA\ngamma\n"
    assert (tmp_path / "mixed.md").read_bytes() == saved
    # the next save starts from what is on disk now: a line added at the end takes the LF of its neighbour
    end = len(svc.read()["text"])
    run(
        svc.apply_edits(
            None, [Edit(end, end, "delta\n")], tool="t", base_version=svc.read()["version"], summary=""
        )
    )
    run(svc.save())
    assert (tmp_path / "mixed.md").read_bytes() == saved + b"delta\n"


def test_a_line_inserted_at_the_top_of_a_mixed_file_takes_the_ending_of_the_line_below(tmp_path):
    (tmp_path / "mixed.md").write_bytes(b"one\r\ntwo\nthree\nfour")
    svc = MarkdownService(tmp_path / "mixed.md", approval_settings={"enabled": False})
    run(svc.apply_edits(None, [Edit(0, 0, "zero\n")], tool="t", base_version=0, summary=""))
    run(svc.save())
    assert (tmp_path / "mixed.md").read_bytes() == b"zero\r\none\r\ntwo\nthree\nfour"


def test_a_failed_save_leaves_the_line_endings_of_the_file_on_disk(tmp_path, monkeypatch):
    """The endings the next save matches against moved on when the text was serialised, before the write: after
    a failed write, undoing the edit and saving again lost the CRLF the file on disk still had."""
    import io

    from deskbridge.core import files

    (tmp_path / "mixed.md").write_bytes(b"a\r\nb\nc\n")
    svc = MarkdownService(tmp_path / "mixed.md", approval_settings={"enabled": False})
    run(svc.apply_edits(None, [Edit(0, 2, "")], tool="t", base_version=0, summary=""))  # drop line "a"

    def disk_full(path, data, **kwargs):
        data(io.BytesIO())  # serialised, then the write fails
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(files, "atomic_write", disk_full)
        with pytest.raises((BridgeError, OSError)):
            run(svc.save())
    assert (tmp_path / "mixed.md").read_bytes() == b"a\r\nb\nc\n"
    run(svc.apply_edits(None, [Edit(0, 0, "a\n")], tool="t", base_version=svc.read()["version"], summary=""))
    run(svc.save())
    assert (tmp_path / "mixed.md").read_bytes() == b"a\r\nb\nc\n"
