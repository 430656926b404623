"""`deskbridge demo`: a sample workspace generated under the user data directory."""

from __future__ import annotations

from pathlib import Path

from deskbridge.settings import deskbridge_dirs


def make_demo_workspace(which: str = "markdown") -> tuple[Path, str]:
    """Create (or refresh) the sample workspace (`markdown` notes or a `pvf` archive) and return it with its kind."""
    if which == "pvf":
        from deskbridge.kinds.pvf.synth import synth

        archive = deskbridge_dirs().data / "demo" / "pvf" / "Script.pvf"
        archive.parent.mkdir(parents=True, exist_ok=True)
        if not archive.exists():  # kept between runs: its edits and history are the person's to look at
            synth(archive, family="classic", files=2000, seed=1)
        return archive, "pvf"
    if which != "markdown":
        from deskbridge.core.errors import BridgeError, ErrorCode

        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"no demo {which!r}",
            "Use `deskbridge demo markdown` or `deskbridge demo pvf`.",
        )
    target = deskbridge_dirs().data / "demo" / "notes"
    target.mkdir(parents=True, exist_ok=True)
    try:
        from deskbridge.kinds.markdown.demo import make_sample_notes
    except (
        ImportError
    ):  # the markdown kind is not installed in this build: serve the folder with the probe kind
        (target / "README.md").write_text("# deskbridge demo\n\nA sample workspace.\n", "utf-8")
        return target, "probe"
    make_sample_notes(target)
    return target, "markdown"
