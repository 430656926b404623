"""`deskbridge demo`: a sample workspace generated under the user data directory."""

from __future__ import annotations

from pathlib import Path

from deskbridge.settings import deskbridge_dirs


def make_demo_workspace() -> tuple[Path, str]:
    """Create (or refresh) the sample notes folder and return it with its kind."""
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
