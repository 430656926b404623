"""One `pvf_plan_preview` / `pvf_plan_apply` / `pvf_plan_discard` for edit, import, export and script plans, over
a real MCP client against `deskbridge serve`; the pvfine design's per-kind names stay callable, unlisted."""

from __future__ import annotations

from pathlib import Path

import pytest
from pvfws_helpers import serve

pytestmark = pytest.mark.anyio

OLD_NAMES = [
    f"pvf_{kind}_{step}" for kind in ("edit", "import", "export", "script") for step in ("preview", "discard")
] + ["pvf_edit_apply", "pvf_import_apply", "pvf_script_apply"]


async def test_one_plan_flow_serves_every_kind_and_the_old_names_stay_callable(
    archive: Path, tmp_path: Path
) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "note.txt").write_text("imported\n", "utf-8")
    async with serve(archive) as a:
        names = {t.name for t in (await a.client.list_tools()).tools}
        assert {"pvf_plan_preview", "pvf_plan_apply", "pvf_plan_discard"} <= names
        assert not names & set(OLD_NAMES)  # accepted on call, not listed
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        path = await a.first_script(ws)
        text = (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]

        # edit: preview (with a filter), an import-only argument refused, apply, gone afterwards
        plan = await a.call(
            "pvf_edit_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "edits": [{"path": path, "text": text + "\n[t]\n1\n"}],
            },
        )
        page = await a.call("pvf_plan_preview", {"planId": plan["planId"], "filter": path})
        assert [i["changeKey"] for i in page["items"]] == [path] and page["plan"]["kind"] == "edit"
        none = await a.call("pvf_plan_preview", {"planId": plan["planId"], "filter": "no/such/folder"})
        assert none["items"] == []
        every = [
            i["changeKey"] for i in (await a.call("pvf_plan_preview", {"planId": plan["planId"]}))["items"]
        ]
        err = await a.fail(
            "pvf_plan_apply",
            {"planId": plan["planId"], "changeKeys": [path], "overwriteKeys": [path]},
            "INVALID_ARGUMENT",
        )
        assert "pvf_plan_apply" in err["hint"]
        # no key at all: the hint says what to call instead of an apply of nothing
        empty = await a.fail(
            "pvf_plan_apply", {"planId": plan["planId"], "changeKeys": []}, "INVALID_ARGUMENT"
        )
        assert "changeKeys" in empty["message"] and "pvf_plan_discard" in empty["hint"], empty
        done = await a.call(
            "pvf_plan_apply", {"planId": plan["planId"], "changeKeys": every, "expectedRevision": rev}
        )
        assert done["revision"] == rev + 1 and done["workspaceCommitted"] and not done["diskCommitted"]
        rev += 1
        gone = await a.fail("pvf_plan_apply", {"planId": plan["planId"], "changeKeys": [path]}, "NOT_FOUND")
        assert "pvf_edit_prepare" in gone["hint"]

        # import: the design's names and argument names (importPlanId, selectedKeys) still work
        plan = await a.call(
            "pvf_import_prepare",
            {"workspaceId": ws, "expectedRevision": rev, "sourcePaths": [str(source)], "targetDir": "etc"},
        )
        old = await a.call("pvf_import_preview", {"importPlanId": plan["importPlanId"]})
        new = await a.call("pvf_plan_preview", {"planId": plan["importPlanId"]})
        assert old["items"] == new["items"] and old["plan"]["kind"] == "import"
        keys = [i["changeKey"] for i in new["items"]]
        assert "etc/src/note.txt" in keys
        done = await a.call("pvf_import_apply", {"importPlanId": plan["importPlanId"], "selectedKeys": keys})
        assert done["revision"] == rev + 1
        rev += 1
        read = await a.call("pvf_read_file", {"workspaceId": ws, "path": "etc/src/note.txt"})
        assert read["text"].startswith("imported")

        # export: previewed and discarded by the shared tools, but run (never "applied") by pvf_export_execute
        plan = await a.call(
            "pvf_export_prepare",
            {"workspaceId": ws, "expectedRevision": rev, "source": "selection", "scopes": ["etc"]},
        )
        page = await a.call("pvf_plan_preview", {"planId": plan["exportPlanId"]})
        assert all(i["entryKey"] == i["changeKey"] for i in page["items"]) and page["items"]
        err = await a.fail(
            "pvf_plan_apply",
            {"planId": plan["exportPlanId"], "changeKeys": ["etc/src/note.txt"]},
            "INVALID_ARGUMENT",
        )
        assert "pvf_export_execute" in err["hint"]
        for _ in range(2):  # twice is harmless
            out = await a.call("pvf_plan_discard", {"planId": plan["exportPlanId"]})
            assert out["state"] == "discarded"
        again = await a.call(
            "pvf_export_prepare",
            {"workspaceId": ws, "expectedRevision": rev, "source": "selection", "scopes": ["etc"]},
        )
        await a.call("pvf_export_discard", {"exportPlanId": again["exportPlanId"]})  # the old name

        # script: the plan of a run, applied against the revision it was run on
        st = await a.run_script(
            ws,
            rev,
            "const f = pvf.glob('equipment/**/*.equ').find((f) => f.path !== "
            + repr(path)
            + " && f.parse().getValue('price') !== null);"
            " const d = f.parse(); d.set('price', 4321); f.write(d);",
        )
        assert st["state"] == "succeeded" and st["planId"], (st.get("error"), st.get("log"))
        page = await a.call("pvf_plan_preview", {"planId": st["planId"]})
        keys = [i["changeKey"] for i in page["items"]]
        err = await a.fail("pvf_plan_apply", {"planId": st["planId"], "changeKeys": keys}, "INVALID_ARGUMENT")
        assert "expectedRevision" in err["message"]
        done = await a.call(
            "pvf_plan_apply", {"planId": st["planId"], "changeKeys": keys, "expectedRevision": rev}
        )
        assert done["revision"] == rev + 1

        # an id nobody issued names the tool that builds that kind of plan
        err = await a.fail("pvf_plan_discard", {"planId": "import-0000000000000000"}, "NOT_FOUND")
        assert "pvf_import_prepare" in err["hint"]
        err = await a.fail("pvf_plan_preview", {"planId": "script-0000000000000000"}, "NOT_FOUND")
        assert "pvf_script_run" in err["hint"]
