"""deskbridge: let AI agents work on a person's local project data safely and live."""

__version__ = "0.1.0"
