"""Markdown as a `core.engine` workspace (issue 10 "One engine"): documents are keys, saves are the core's.

The service is the one the web routes and MCP tools call; these tests look at what the engine now owns —
per-key admission, the revision, the saved state, the one identity record — through the service.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import file_identity
from deskbridge.core.tools import CallContext
from deskbridge.kinds.markdown.collab import Edit
from deskbridge.kinds.markdown.service import MarkdownService
from deskbridge.kinds.markdown.store import MarkdownStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("# B\n\nbeta\n", encoding="utf-8")
    return tmp_path


def _service(folder: Path) -> tuple[MarkdownService, str, str]:
    svc = MarkdownService(folder, approval_settings={"enabled": False})
    a = svc.open_path(folder / "a.md").doc_id
    b = svc.open_path(folder / "b.md").doc_id
    return svc, a, b


async def _type(svc: MarkdownService, doc_id: str, text: str) -> None:
    doc = svc.get(doc_id)
    await svc.apply_edits(doc_id, [Edit(0, 0, text)], tool="t", base_version=doc.version, summary="")


def test_documents_are_keys_of_one_engine_workspace(folder):
    svc, a, b = _service(folder)
    ws = svc.engine.workspace
    assert ws is not None and sorted(ws.all_keys()) == sorted([a, b])
    # one identity per key: the document's identity is the engine's record
    assert svc.get(a).identity is ws.key_identities[a] == file_identity(folder / "a.md")
    assert ws.dirty_keys() == []


async def test_the_revision_is_the_engines_and_names_one_collab_version(folder):
    svc, a, b = _service(folder)
    ws = svc.engine.workspace
    before = svc.get(a).revision
    await _type(svc, a, "x")
    doc = svc.get(a)
    number, _, tag = doc.revision.partition("-")
    assert int(number) == ws.revision and tag == ws.id[-6:]
    assert doc.version_of(doc.revision) == doc.version == 1
    assert doc.version_of(before) == 0
    # another document's change moves the engine revision; a's revisions still name a's versions
    await _type(svc, b, "y")
    assert doc.version_of(f"{ws.revision}-{tag}") == 1 and svc.get(b).revision == f"{ws.revision}-{tag}"
    # a revision of another engine workspace (a restarted server) is never taken for one of this one
    other, a2, _b2 = _service(folder)
    with pytest.raises(BridgeError) as err:
        other.get(a2).version_of(doc.revision)
    assert err.value.code is ErrorCode.STALE_WORKSPACE
    with pytest.raises(BridgeError) as err:
        doc.version_of(f"{ws.revision + 5}-{tag}")  # not issued yet
    assert err.value.code is ErrorCode.STALE_WORKSPACE


async def test_saved_state_is_the_engines_per_key_state(folder):
    svc, a, b = _service(folder)
    await _type(svc, a, "x")
    await _type(svc, b, "y")
    assert svc.engine.workspace.dirty_keys() == [a, b]
    out = await svc.save(a)
    assert out["dirty"] is False and svc.get(b).dirty
    assert (folder / "a.md").read_text("utf-8") == "x# A\n\nalpha\n"
    assert svc.engine.workspace.dirty_keys() == [b]
    assert svc.get(a).identity == file_identity(folder / "a.md")


async def test_saving_b_while_a_is_being_written_is_not_refused(folder, monkeypatch):
    svc, a, b = _service(folder)
    await _type(svc, a, "A!")
    await _type(svc, b, "B!")
    entered, release = threading.Event(), threading.Event()
    real = MarkdownStore.serialize_key

    def held(self, ws, key, out, snapshot):
        if key == a:
            entered.set()
            assert release.wait(10)
        return real(self, ws, key, out, snapshot)

    monkeypatch.setattr(MarkdownStore, "serialize_key", held)
    saving_a = asyncio.create_task(svc.save(a))
    try:
        assert await asyncio.to_thread(entered.wait, 10)
        assert (await svc.save(b))["dirty"] is False  # B saves beside A
        with pytest.raises(BridgeError) as err:
            await svc.save(a)  # A itself is admitted once
        assert err.value.code is ErrorCode.NOT_READY
        # the person keeps typing into A while it is written: that typing is not saved yet, and says so
        svc.push(
            a, svc.get(a).version, [{"clientID": "tab", "changes": [[0, "more "], len(svc.get(a).text)]}]
        )
    finally:
        release.set()
    out = await saving_a
    assert out["dirty"] is True
    assert (folder / "a.md").read_text("utf-8") == "A!# A\n\nalpha\n"
    assert (folder / "b.md").read_text("utf-8") == "B!# B\n\nbeta\n"
    await svc.save(a)
    assert (folder / "a.md").read_text("utf-8").startswith("more A!") and not svc.get(a).dirty


async def test_a_touched_file_is_saved_a_replaced_one_is_not(folder):
    svc, a, _b = _service(folder)
    await _type(svc, a, "x")
    os.utime(folder / "a.md", ns=(10**18, 10**18))  # a sync client touched it: same bytes
    await svc.save(a)
    assert (folder / "a.md").read_text("utf-8").startswith("x# A")
    await _type(svc, a, "y")
    (folder / "a.md").write_text("theirs\n", encoding="utf-8")
    with pytest.raises(BridgeError) as err:
        await svc.save(a)
    assert err.value.code is ErrorCode.SOURCE_CHANGED
    assert (folder / "a.md").read_text("utf-8") == "theirs\n" and svc.get(a).external_change


async def test_a_refused_save_tells_the_person_and_the_agent_each_what_they_can_do(folder):
    """The person's Ctrl+S was told to "ask the person … then call md_save_current_document"; an agent without
    an editor (stdio) was told only to ask a person nobody could reach, though save-as loses nothing."""
    svc, a, _b = _service(folder)
    await _type(svc, a, "mine ")
    (folder / "a.md").write_text("theirs\n", encoding="utf-8")
    with pytest.raises(BridgeError) as err:
        await svc.save(a)  # the editor's own save (caller ui)
    assert err.value.code is ErrorCode.SOURCE_CHANGED
    assert "Reload from disk" in err.value.hint and "md_" not in err.value.hint
    with pytest.raises(BridgeError) as err:
        await svc.save(a, ctx=CallContext(caller="mcp:agent", client_name="agent"))
    assert err.value.code is ErrorCode.SOURCE_CHANGED and "md_save_current_document_as" in err.value.hint
    out = await svc.save_as(a, "mine.md")
    assert out["dirty"] is False and (folder / "mine.md").read_text("utf-8").startswith("mine # A")
    assert (folder / "a.md").read_text("utf-8") == "theirs\n"


async def test_save_as_moves_the_document_to_its_new_file_and_refuses_silent_overwrites(folder):
    svc, a, _b = _service(folder)
    await _type(svc, a, "x")
    with pytest.raises(BridgeError) as err:
        await svc.save_as(a, "b.md")  # open as another document
    assert err.value.code is ErrorCode.TARGET_EXISTS
    (folder / "c.md").write_text("C\n", encoding="utf-8")
    with pytest.raises(BridgeError) as err:
        await svc.save_as(a, "c.md")
    assert err.value.code is ErrorCode.TARGET_EXISTS and (folder / "c.md").read_text("utf-8") == "C\n"
    out = await svc.save_as(a, "c.md", overwrite=True)
    assert out["fileName"] == "c.md" and out["dirty"] is False
    assert (folder / "c.md").read_text("utf-8") == "x# A\n\nalpha\n"
    assert svc.get(a).identity == file_identity(folder / "c.md")
    await _type(svc, a, "y")
    await svc.save(a)  # later saves go to the new file; the old one is left as it was
    assert (folder / "c.md").read_text("utf-8").startswith("yx# A") and (folder / "a.md").read_text(
        "utf-8"
    ) == "# A\n\nalpha\n"


async def test_closing_a_document_drops_its_key(folder):
    svc, a, b = _service(folder)
    await _type(svc, a, "x")
    await svc.close(a, discard=True)
    ws = svc.engine.workspace
    assert list(ws.all_keys()) == [b] and a not in ws.key_identities and not ws.dirty


async def test_a_revision_of_a_closed_document_never_names_a_version_of_its_reopening(folder):
    svc, a, _b = _service(folder)
    await _type(svc, a, "unsaved ")
    old_revision = svc.get(a).revision
    await svc.close(a, discard=True)
    again = svc.open_path(folder / "a.md")
    with pytest.raises(BridgeError) as err:
        again.version_of(old_revision)
    assert err.value.code is ErrorCode.STALE_WORKSPACE
    assert not again.dirty and not svc.engine.workspace.dirty


async def test_opening_a_document_is_the_cores_per_key_open(folder, monkeypatch):
    svc, a, _b = _service(folder)
    ws = svc.engine.workspace
    (folder / "c.md").write_text("# C\n", encoding="utf-8")
    before = ws.revision
    events: list[tuple[str, dict]] = []
    publish = svc.engine.bus.publish
    monkeypatch.setattr(svc.engine.bus, "publish", lambda t, d: (events.append((t, d)), publish(t, d)))
    info = await svc.open(str(folder / "c.md"))
    c = info["docId"]
    assert [d["key"] for t, d in events if t == "workspace" and d["event"] == "key-opened"] == [c]
    # one identity record, the engine's, taken around the read; the open is one revision, clean
    assert (
        ws.key_identities[c] == file_identity(folder / "c.md") and svc.get(c).identity is ws.key_identities[c]
    )
    assert ws.revision == before + 1 and not svc.get(c).dirty and info["current"] is True
    # the same file again is the same document
    assert (await svc.open(str(folder / "c.md")))["docId"] == c and ws.revision == before + 1
    # while a's document is being saved, opening a's file is NOT_READY (not a document about to change)
    await _type(svc, a, "A!")
    entered, release = threading.Event(), threading.Event()
    real = MarkdownStore.serialize_key

    def held(self, ws, key, out, snapshot):
        if key == a:
            entered.set()
            assert release.wait(10)
        return real(self, ws, key, out, snapshot)

    monkeypatch.setattr(MarkdownStore, "serialize_key", held)
    saving_a = asyncio.create_task(svc.save(a))
    try:
        assert await asyncio.to_thread(entered.wait, 10)
        with pytest.raises(BridgeError) as err:
            await svc.open(str(folder / "a.md"))
        assert err.value.code is ErrorCode.NOT_READY and err.value.data["keys"] == [a]
        (folder / "d.md").write_text("# D\n", encoding="utf-8")
        assert (await svc.open(str(folder / "d.md")))["path"] == "d.md"  # another file opens meanwhile
    finally:
        release.set()
    await saving_a
    assert (await svc.open(str(folder / "a.md")))["docId"] == a


def test_a_new_document_is_a_key_without_a_file(folder):
    svc, _a, _b = _service(folder)
    doc = svc.new_document("hello")
    ws = svc.engine.workspace
    assert ws.exists(doc.doc_id) and ws.key_identity(doc.doc_id) is None and doc.path is None
    assert doc.text == "hello" and not doc.dirty and svc.current_id == doc.doc_id


async def test_save_as_refuses_a_target_changed_after_the_person_was_asked(folder):
    from deskbridge.core.tools import CallContext

    ai = CallContext(caller="mcp:s", client_name="Claude")
    svc, a, _b = _service(folder)
    (folder / "t.md").write_text("old\n", encoding="utf-8")
    assert svc.overwrite_question(a, "t.md", False) is None  # no overwrite asked for: nothing to ask
    question = svc.overwrite_question(a, "t.md", True)  # what App.invoke shows the person (one bounded read)
    assert question is not None and "-old" in (question.diff or "") and question.target == "t.md"
    (folder / "t.md").write_text("someone else's newer text\n", encoding="utf-8")
    with pytest.raises(BridgeError) as err:
        await svc.save_as(a, "t.md", overwrite=True, ctx=ai)
    assert err.value.code is ErrorCode.TARGET_CHANGED
    assert (folder / "t.md").read_text("utf-8") == "someone else's newer text\n"
    # asked again, about the file as it is now: the save goes through
    assert "-someone" in (svc.overwrite_question(a, "t.md", True).diff or "")
    await svc.save_as(a, "t.md", overwrite=True, ctx=ai)
    assert (folder / "t.md").read_text("utf-8") == "# A\n\nalpha\n"
