"""Format-agnostic engine: identity, revisions, tasks, plans, lifecycle, files, events, audit, policy."""
