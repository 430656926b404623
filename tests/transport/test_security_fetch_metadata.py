"""REL-ATTACK, /api and Fetch Metadata: a page's elements get nothing from the JSON API but a document's pictures.

Browsers say what a request is for (`Sec-Fetch-Dest`, w3c.github.io/webappsec-fetch-metadata). deskbridge's own
pages call /api with fetch and EventSource (`empty`); non-browser clients (curl, the MCP bridge) send no Fetch
Metadata at all. Anything else is an element of a page — a document's `<img>`, `<iframe>`, `<object>`, `<script>`
or a link opened as a document — which is same-origin and carries the session cookie in the markdown preview, so
only the destination tells it apart. One rule in the platform's middleware answers for every route; a route that
serves elements (the markdown pictures) says so.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from deskbridge.testing import running_server

pytestmark = [pytest.mark.anyio, pytest.mark.security]

ELEMENT_DESTINATIONS = (
    "document",
    "iframe",
    "frame",
    "image",
    "script",
    "style",
    "object",
    "embed",
    "audio",
    "video",
    "font",
    "worker",
    "track",
)
"""`Sec-Fetch-Dest` values a page's markup (or a link) makes a browser send (the Fetch standard's destinations)."""

PNG = b"\x89PNG\r\n\x1a\n" + b"0" * 16


def browser_headers(dest: str) -> dict[str, str]:
    """What a browser sends with a same-origin request for `dest` (the whole Fetch Metadata set)."""
    mode = "cors" if dest == "empty" else "navigate" if dest in ("document", "iframe", "frame") else "no-cors"
    return {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": mode, "Sec-Fetch-Dest": dest}


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    """A document with a picture beside it (served like `deskbridge serve notes.md`)."""
    root = tmp_path / "notes"
    root.mkdir()
    (root / "pic.png").write_bytes(PNG)
    document = root / "notes.md"
    document.write_text("# Notes\n\n![pic](pic.png)\n", "utf-8")
    return document


async def _doc_id(http: httpx2.AsyncClient, base: str) -> str:
    return (await http.get(base + "/api/markdown/docs")).json()["docs"][0]["docId"]


async def test_a_pages_elements_get_nothing_from_the_api(notes: Path) -> None:
    async with running_server(notes, kind="markdown") as srv, httpx2.AsyncClient() as http:
        await http.get(
            srv.login_url()
        )  # the person's browser session: the cookie goes along with every element
        doc = await _doc_id(http, srv.base_url)
        paths = (
            "/api/status",
            "/api/events?editor=evil",
            "/api/approvals",
            "/api/audit",
            "/api/settings",
            "/api/integrations/hosts",
            f"/api/markdown/docs/{doc}",
            f"/api/markdown/docs/{doc}/pull?version=0&wait=0",
        )
        for dest in ELEMENT_DESTINATIONS:
            for path in paths:
                r = await http.get(srv.base_url + path, headers=browser_headers(dest))
                assert r.status_code == 403, (dest, path, r.status_code)
                error = r.json()["error"]
                assert error["code"] == "ACCESS_DENIED" and repr(dest) in error["message"], (dest, path)
                assert error["hint"], (dest, path)
        assert (
            not srv.app.approvals.ui_attached
        )  # no <img src=/api/events> made the broker think a person watches


async def test_a_post_from_a_pages_form_is_refused_too(notes: Path) -> None:
    async with running_server(notes, kind="markdown") as srv, httpx2.AsyncClient() as http:
        await http.get(srv.login_url())
        for dest in ("document", "iframe"):
            r = await http.post(
                srv.base_url + "/api/token/rotate", headers=browser_headers(dest) | {"Origin": srv.base_url}
            )
            assert r.status_code == 403 and r.json()["error"]["code"] == "ACCESS_DENIED", dest
        assert (
            await http.post(srv.base_url + "/api/token/rotate", headers=browser_headers("empty"))
        ).is_success


async def test_a_browser_request_that_does_not_say_its_destination_is_refused(notes: Path) -> None:
    # A browser that sends Fetch Metadata sends Sec-Fetch-Dest with it; a request with the one but not the other
    # is not the page's own fetch, and the rule answers only `empty` or no Fetch Metadata at all.
    async with running_server(notes, kind="markdown") as srv, httpx2.AsyncClient() as http:
        await http.get(srv.login_url())
        for partial in (
            {"Sec-Fetch-Site": "same-origin"},
            {"Sec-Fetch-Mode": "no-cors"},
            {"Sec-Fetch-User": "?1"},
        ):
            r = await http.get(srv.base_url + "/api/status", headers=partial)
            assert r.status_code == 403 and r.json()["error"]["code"] == "ACCESS_DENIED", partial


async def test_the_pages_own_fetches_and_clients_without_fetch_metadata_are_answered(notes: Path) -> None:
    async with running_server(notes, kind="markdown") as srv, httpx2.AsyncClient() as http:
        await http.get(srv.login_url())
        doc = await _doc_id(http, srv.base_url)
        for path in ("/api/status", "/api/audit", f"/api/markdown/docs/{doc}"):
            assert (await http.get(srv.base_url + path, headers=browser_headers("empty"))).status_code == 200
            assert (await http.get(srv.base_url + path)).status_code == 200, path  # curl, the MCP bridge


async def test_a_documents_pictures_load_as_images_and_as_nothing_else(notes: Path) -> None:
    async with running_server(notes, kind="markdown") as srv, httpx2.AsyncClient() as http:
        await http.get(srv.login_url())
        picture = f"{srv.base_url}/api/markdown/docs/{await _doc_id(http, srv.base_url)}/asset/pic.png"
        for dest in ("image", "empty"):
            r = await http.get(picture, headers=browser_headers(dest))
            assert r.status_code == 200 and r.content == PNG, dest
        assert (await http.get(picture)).status_code == 200
        for dest in (d for d in ELEMENT_DESTINATIONS if d != "image"):
            r = await http.get(picture, headers=browser_headers(dest))
            assert r.status_code == 403 and r.json()["error"]["code"] == "ACCESS_DENIED", dest
